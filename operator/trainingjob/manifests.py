"""Pure builders of a job's children: the headless Service and one pod per replica, with the trainer's
environment (see contract.py)."""

import json
from typing import Any

from trainingjob import access, contract
from trainingjob.contract import ROLE_PS, ROLE_WORKER
from trainingjob.model import CHECKPOINT_VOLUME_NAME, RoleSpec, TrainingJob
from trainingjob.naming import (
    CONTAINER_NAME,
    JOB_LABEL,
    KUEUE_GROUP_COUNT_ANNOTATION,
    KUEUE_POD_GROUP_LABEL,
    KUEUE_QUEUE_LABEL,
    MIN_AVAILABLE_ANNOTATION,
    TRACKING_GATE,
    VOLCANO_GROUP_ANNOTATION,
    Replica,
    pod_labels,
    service_name,
)

MASTER_PORT = 29500
PS_PORT = 29501
PROGRESS_PORT = 29400
TRAINER_COMMAND = ("python", "-m", "trainer")


def replicas(job: TrainingJob) -> list[Replica]:
    """Every pod slot of the job, parameter servers first."""
    spec = job.spec
    servers = spec.parameter_servers.replicas if spec.parameter_servers else 0
    return [Replica(ROLE_PS, i) for i in range(servers)] + [
        Replica(ROLE_WORKER, i) for i in range(spec.workers.replicas)
    ]


def role_spec(job: TrainingJob, role: str) -> RoleSpec:
    if role == ROLE_PS and job.spec.parameter_servers is not None:
        return job.spec.parameter_servers
    return job.spec.workers


def owner_reference(job: TrainingJob, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": job.api_version,
        "kind": job.kind,
        "name": job.metadata.name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def service_manifest(job: TrainingJob, uid: str) -> dict[str, Any]:
    """A headless Service that gives every replica a stable DNS name, published before pods are ready."""
    name = str(job.metadata.name)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": service_name(name),
            "labels": {JOB_LABEL: name},
            "ownerReferences": [owner_reference(job, uid)],
        },
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {JOB_LABEL: name},
            "ports": [
                {"name": "rendezvous", "port": MASTER_PORT, "protocol": "TCP"},
                {"name": "parameter-server", "port": PS_PORT, "protocol": "TCP"},
            ],
        },
    }


def checkpoint_dir(job: TrainingJob, mount_path: str) -> str:
    """This job's own folder on the checkpoint volume: jobs sharing a volume, or a job re-created under the
    same name, never see each other's checkpoints."""
    uid = str(getattr(job.metadata, "uid", "") or "no-uid")
    return f"{mount_path.rstrip('/')}/{job.metadata.name}/{uid}"


def environment(job: TrainingJob, replica: Replica, attempt: int) -> dict[str, str]:
    """The variables the trainer (or an unmodified torchrun script) reads, for one replica."""
    name, namespace = str(job.metadata.name), str(job.metadata.namespace)
    spec = job.spec
    workers, nproc = spec.workers.replicas, spec.workers.nproc_per_pod
    servers = [r for r in replicas(job) if r.role == ROLE_PS]
    master = Replica(ROLE_WORKER, 0).address(name, namespace)
    node_rank = replica.index if replica.role == ROLE_WORKER else 0
    env = {
        contract.MASTER_ADDR: master,
        contract.MASTER_PORT: str(MASTER_PORT),
        contract.WORLD_SIZE: str(workers * nproc),
        contract.RANK: str(node_rank * nproc),
        contract.LOCAL_RANK: "0",
        contract.NODE_RANK: str(node_rank),
        contract.PET_NNODES: str(workers),
        contract.PET_NPROC_PER_NODE: str(nproc),
        contract.PET_NODE_RANK: str(node_rank),
        contract.PET_MASTER_ADDR: master,
        contract.PET_MASTER_PORT: str(MASTER_PORT),
        contract.JOB_NAME: name,
        contract.NAMESPACE: namespace,
        contract.ATTEMPT: str(attempt),
        contract.ROLE: replica.role,
        contract.REPLICA_INDEX: str(replica.index),
        contract.NUM_WORKERS: str(workers),
        contract.NUM_PS: str(len(servers)),
        contract.PS_ADDRS: ",".join(f"{r.address(name, namespace)}:{PS_PORT}" for r in servers),
        contract.NPROC_PER_POD: str(nproc),
        contract.PROGRESS_PORT: str(PROGRESS_PORT),
        contract.MASTER_WAIT_SECONDS: str(spec.run_policy.startup_deadline_seconds),
        contract.JOB_KEY_FILE: f"{access.KEY_MOUNT_PATH}/{access.KEY_FILE}",
    }
    if spec.checkpoint is not None:
        env[contract.CHECKPOINT_DIR] = checkpoint_dir(job, spec.checkpoint.path)
        env[contract.CHECKPOINT_KEEP] = str(spec.checkpoint.keep)
        if spec.checkpoint.every_steps is not None:
            env[contract.CHECKPOINT_EVERY_STEPS] = str(spec.checkpoint.every_steps)
        if spec.checkpoint.every_seconds is not None:
            env[contract.CHECKPOINT_EVERY_SECONDS] = str(spec.checkpoint.every_seconds)
    if spec.trainer is not None:
        trainer = spec.trainer.model_dump(mode="json", by_alias=True, exclude_none=True)
        env[contract.TRAINER_CONFIG] = json.dumps(trainer, sort_keys=True)
    return env


def _container(job: TrainingJob, replica: Replica, attempt: int, role: RoleSpec) -> dict[str, Any]:
    ours = environment(job, replica, attempt)
    user_env = [e.model_dump(mode="json", by_alias=True, exclude_none=True) for e in role.env or []]
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": role.image,
        "command": list(role.command) if role.command else list(TRAINER_COMMAND),
        "env": user_env + [{"name": key, "value": value} for key, value in sorted(ours.items())],
        "ports": [
            {"name": "rendezvous", "containerPort": MASTER_PORT},
            {"name": "parameter-srv", "containerPort": PS_PORT},
            {"name": "progress", "containerPort": PROGRESS_PORT},
        ],
    }
    optional = {
        "args": role.args,
        "workingDir": role.working_dir,
        "imagePullPolicy": role.image_pull_policy,
        "resources": _resources(role),
        "volumeMounts": [_dump(m) for m in role.volume_mounts or []] + _checkpoint_mount(job) + [access.key_mount()],
    }
    container["securityContext"] = role.security_context.container_context()
    container.update({key: value for key, value in optional.items() if value})
    return container


def _resources(role: RoleSpec) -> dict[str, dict[str, str]]:
    """Quantities as strings, as the API serves them (the model also takes plain numbers)."""
    resources = _dump(role.resources) or {}
    return {kind: {name: str(value) for name, value in amounts.items()} for kind, amounts in resources.items()}


def _dump(model: Any) -> Any:
    return None if model is None else model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _checkpoint_mount(job: TrainingJob) -> list[dict[str, Any]]:
    if job.spec.checkpoint is None:
        return []
    return [{"name": CHECKPOINT_VOLUME_NAME, "mountPath": job.spec.checkpoint.path}]


def _volumes(job: TrainingJob, uid: str, role: RoleSpec) -> list[dict[str, Any]]:
    volumes = [_dump(v) for v in role.volumes or []] + [access.key_volume(str(job.metadata.name), uid)]
    if job.spec.checkpoint is not None:
        source = _dump(job.spec.checkpoint.volume)
        volumes.append({"name": CHECKPOINT_VOLUME_NAME, **source})
    return volumes


def pod_manifest(job: TrainingJob, uid: str, replica: Replica, attempt: int) -> dict[str, Any]:
    """The pod of one replica in one attempt. The operator restarts pods itself, so restartPolicy is Never; the pod
    waits at the tracking gate until the operator has recorded it."""
    name = str(job.metadata.name)
    role = role_spec(job, replica.role)
    scheduling = job.spec.scheduling
    min_available = (scheduling.min_available if scheduling else None) or len(replicas(job))
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "schedulingGates": [{"name": TRACKING_GATE}],
        "hostname": replica.hostname(name),
        "subdomain": service_name(name),
        "securityContext": role.security_context.pod_context(),
        "terminationGracePeriodSeconds": role.termination_grace_period_seconds,
        "containers": [_container(job, replica, attempt, role)],
    }
    optional = {
        "volumes": _volumes(job, uid, role),
        "nodeSelector": role.node_selector,
        "tolerations": [_dump(t) for t in role.tolerations or []],
        "affinity": _dump(role.affinity),
        "serviceAccountName": role.service_account_name,
        "priorityClassName": role.priority_class_name or (scheduling.priority_class_name if scheduling else None),
        "schedulerName": scheduling.scheduler_name if scheduling else None,
    }
    spec.update({key: value for key, value in optional.items() if value})
    labels = pod_labels(name, replica, attempt)
    annotations = {MIN_AVAILABLE_ANNOTATION: str(min_available), VOLCANO_GROUP_ANNOTATION: name}
    if scheduling and scheduling.queue_name:
        labels |= {KUEUE_QUEUE_LABEL: scheduling.queue_name, KUEUE_POD_GROUP_LABEL: f"{name}-{attempt}"}
        annotations[KUEUE_GROUP_COUNT_ANNOTATION] = str(len(replicas(job)))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": replica.pod_name(name, attempt),
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_reference(job, uid)],
        },
        "spec": spec,
    }


def access_manifests(job: TrainingJob, uid: str, operator_namespace: str, network_policy: bool) -> list[dict[str, Any]]:
    """The job's key Secret and (unless turned off) its NetworkPolicy, created with its pods."""
    name, owner = str(job.metadata.name), owner_reference(job, uid)
    created = [access.key_secret_manifest(name, uid, owner)]
    if network_policy:
        created.append(access.network_policy_manifest(name, uid, owner, PROGRESS_PORT, operator_namespace or None))
    return created
