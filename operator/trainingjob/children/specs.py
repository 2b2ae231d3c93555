"""Pure builders of a job's children: the headless Service and one pod per replica, with the trainer's
environment (see contract.py)."""

import json
from typing import Any

from trainingjob.children import access, agent, contract
from trainingjob.children.contract import ROLE_PS, ROLE_WORKER
from trainingjob.children.naming import (
    CONTAINER_NAME,
    JOB_LABEL,
    MIN_AVAILABLE_ANNOTATION,
    OPERATOR_LABELS,
    TRACKING_FINALIZER,
    VOLCANO_GROUP_ANNOTATION,
    Replica,
    operator_owned,
    pod_labels,
    service_name,
)
from trainingjob.model import (
    CHECKPOINT_VOLUME_NAME,
    SHM_PATH,
    SHM_VOLUME_NAME,
    Container,
    Mode,
    Resources,
    RoleSpec,
    TopologySpreadConstraint,
    TrainingJob,
)
from trainingjob.model.security import ContainerSecurity
from trainingjob.settings import DEFAULT_TRAINER_IMAGE
from trainingjob.sweep.checkpoints import told
from trainingjob.sweep.trials import SWEEP_LABEL

MASTER_PORT = 29500
PS_PORT = 29501
PROGRESS_PORT = 29400
TRAINER_COMMAND = ("python", "-m", "trainer")


def server_count(job: TrainingJob) -> int:
    return job.spec.parameter_servers.replicas if job.spec.parameter_servers else 0


def worker_count(job: TrainingJob) -> int:
    """The workers an attempt runs with: status.scale.current for an elastic job the operator resized
    (plan/elastic.py), spec.workers.replicas otherwise."""
    scale = job.status.scale if job.status is not None else None
    return scale.current if scale is not None and scale.current >= 1 else job.spec.workers.replicas


def replica_count(job: TrainingJob) -> int:
    return server_count(job) + worker_count(job)


def replicas(job: TrainingJob) -> list[Replica]:
    """Every pod slot of the job's current attempt, parameter servers first."""
    return [Replica(ROLE_PS, i) for i in range(server_count(job))] + [
        Replica(ROLE_WORKER, i) for i in range(worker_count(job))
    ]


def role_spec(job: TrainingJob, role: str) -> RoleSpec:
    if role == ROLE_PS and job.spec.parameter_servers is not None:
        return job.spec.parameter_servers
    return job.spec.workers


def uses_default_image(job: TrainingJob) -> bool:
    """Whether a role of the job names no image, and so runs the operator's default trainer image."""
    return any(role.image is None for role in (job.spec.workers, job.spec.parameter_servers) if role is not None)


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
    workers, nproc = worker_count(job), spec.workers.nproc_per_pod
    servers = [Replica(ROLE_PS, i) for i in range(server_count(job))]
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
    # elastic: the global batch is the full job's at any world size (the trainer accumulates gradients)
    if spec.workers.fewest_replicas < spec.workers.replicas:
        env[contract.DESIRED_WORLD_SIZE] = str(spec.workers.replicas * nproc)
    if spec.mode == Mode.PARAMETER_SERVER and spec.workers.min_replicas is not None:  # plan/ps_room.py
        env[contract.MIN_WORKERS] = str(spec.workers.min_replicas)
    if spec.checkpoint is not None:
        env[contract.CHECKPOINT_DIR] = checkpoint_dir(job, spec.checkpoint.path)
        env[contract.CHECKPOINT_KEEP] = str(spec.checkpoint.keep)
        if spec.checkpoint.every_steps is not None and not spec.checkpoint.auto:
            env[contract.CHECKPOINT_EVERY_STEPS] = str(spec.checkpoint.every_steps)
        if spec.checkpoint.every_seconds is not None:
            env[contract.CHECKPOINT_EVERY_SECONDS] = str(spec.checkpoint.every_seconds)
    trial = SWEEP_LABEL in (job.metadata.labels or {})  # a sweep's trial, told which finished trials' folders go
    removals = told(job.metadata.annotations) if trial and spec.checkpoint is not None else []
    if removals and replica == Replica(ROLE_WORKER, 0):  # rank 0's trainer removes them as it starts
        env[contract.REMOVE_CHECKPOINTS] = json.dumps(removals)
    if spec.trainer is not None:
        trainer = spec.trainer.model_dump(mode="json", by_alias=True, exclude_none=True)
        env[contract.TRAINER_CONFIG] = json.dumps(trainer, sort_keys=True)
    return env


def _container(
    job: TrainingJob, replica: Replica, attempt: int, role: RoleSpec, image: str, *, in_place: bool, pacing: str | None
) -> dict[str, Any]:
    ours = environment(job, replica, attempt) | (agent.environment(job) if in_place else {})
    if pacing is not None:
        ours[contract.CHECKPOINT_PACING] = pacing
    user_env = [_dump(e) for e in role.env or []]
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": role.image or image,
        "command": list(role.command) if role.command else list(TRAINER_COMMAND),
        "env": user_env + [{"name": key, "value": value} for key, value in sorted(ours.items())],
        "ports": [
            {"name": "rendezvous", "containerPort": MASTER_PORT},
            {"name": "parameter-srv", "containerPort": PS_PORT},
            {"name": "progress", "containerPort": PROGRESS_PORT},
            *([{"name": "agent", "containerPort": agent.AGENT_PORT}] if in_place else []),
        ],
    }
    mounts = [_dump(m) for m in role.volume_mounts or []] + _checkpoint_mount(job) + [access.key_mount(), _SHM_MOUNT]
    optional = {
        "args": role.args,
        "workingDir": role.working_dir,
        "imagePullPolicy": role.image_pull_policy,
        "envFrom": [_dump(e) for e in role.env_from or []],
        "resources": _resources(role.resources),
        "volumeMounts": mounts,
        "readinessProbe": agent.readiness_probe(replica, every_worker=job.spec.mode == Mode.PARAMETER_SERVER)
        if in_place
        else None,
    }
    container["securityContext"] = role.security_context.container_context()
    container.update({key: value for key, value in optional.items() if value})
    return container


def _extra_container(container: Container, role: RoleSpec, *, sidecar: bool) -> dict[str, Any]:
    """An init container or a native sidecar (an init container that keeps running: restartPolicy Always)."""
    manifest: dict[str, Any] = _dump(container.model_copy(update={"resources": None, "security_context": None}))
    security = container.security_context or ContainerSecurity()
    manifest["securityContext"] = security.container_context(role.security_context)
    manifest["volumeMounts"] = [*manifest.get("volumeMounts", []), _SHM_MOUNT]
    manifest.update({"resources": _resources(container.resources)} if container.resources else {})
    return {**manifest, "restartPolicy": "Always"} if sidecar else manifest


def _resources(resources: Resources | None) -> dict[str, dict[str, str]]:
    """Quantities as strings, as the API serves them (the model also takes plain numbers)."""
    dumped = _dump(resources) or {}
    return {kind: {name: str(value) for name, value in amounts.items()} for kind, amounts in dumped.items()}


def _dump(model: Any) -> Any:
    return None if model is None else model.model_dump(mode="json", by_alias=True, exclude_none=True)


_SHM_MOUNT = {"name": SHM_VOLUME_NAME, "mountPath": SHM_PATH}


def _checkpoint_mount(job: TrainingJob) -> list[dict[str, Any]]:
    if job.spec.checkpoint is None:
        return []
    return [{"name": CHECKPOINT_VOLUME_NAME, "mountPath": job.spec.checkpoint.path}]


def _volumes(job: TrainingJob, uid: str, role: RoleSpec) -> list[dict[str, Any]]:
    volumes = [_dump(v) for v in role.volumes or []] + [access.key_volume(str(job.metadata.name), uid)]
    volumes.append({"name": SHM_VOLUME_NAME, "emptyDir": {"medium": "Memory", "sizeLimit": str(role.shm_size)}})
    if job.spec.checkpoint is not None:
        source = _dump(job.spec.checkpoint.volume)
        volumes.append({"name": CHECKPOINT_VOLUME_NAME, **source})
    return volumes


def pod_manifest(
    job: TrainingJob,
    uid: str,
    replica: Replica,
    attempt: int,
    default_image: str = DEFAULT_TRAINER_IMAGE,
    *,
    in_place: bool = True,
    pacing: str | None = None,
) -> dict[str, Any]:
    """The pod of one replica in one attempt; a role without an image runs `default_image`. The operator restarts
    pods itself, so restartPolicy is Never; its tracking finalizer keeps it until the operator has recorded how it
    ended. With `in_place` (and a job that has agents, children/agent.py) its launcher restarts its trainer in place
    when told. `pacing` is the trainer's TJ_CHECKPOINT_PACING (children/pacing.py)."""
    name, in_place = str(job.metadata.name), in_place and agent.has_agent(job, replica)
    metadata = _pod_metadata(job, replica, attempt)
    if in_place:
        metadata["labels"][agent.IN_PLACE_LABEL] = "true"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": replica.pod_name(name, attempt),
            **metadata,
            "ownerReferences": [owner_reference(job, uid)],
            "finalizers": [TRACKING_FINALIZER],
        },
        "spec": _pod_spec(job, uid, replica, attempt, default_image, in_place=in_place, pacing=pacing),
    }


def _pod_metadata(job: TrainingJob, replica: Replica, attempt: int) -> dict[str, dict[str, str]]:
    """Labels and annotations: the job's labels, then the role's, then the operator's, each winning over the
    ones before."""
    name, scheduling = str(job.metadata.name), job.spec.scheduling
    own = role_spec(job, replica.role).pod_metadata
    labels = {k: v for k, v in (job.metadata.labels or {}).items() if not operator_owned(k, OPERATOR_LABELS)}
    labels |= (own.labels if own else None) or {}
    labels |= pod_labels(name, replica, attempt)
    min_available = (scheduling.min_available if scheduling else None) or replica_count(job)
    annotations = dict((own.annotations if own else None) or {})
    annotations |= {MIN_AVAILABLE_ANNOTATION: str(min_available), VOLCANO_GROUP_ANNOTATION: name}
    return {"labels": labels, "annotations": annotations}


def _pod_spec(
    job: TrainingJob, uid: str, replica: Replica, attempt: int, image: str, *, in_place: bool, pacing: str | None
) -> dict[str, Any]:
    name, scheduling = str(job.metadata.name), job.spec.scheduling
    role = role_spec(job, replica.role)
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "hostname": replica.hostname(name),
        "subdomain": service_name(name),
        "securityContext": role.security_context.pod_context(),
        "terminationGracePeriodSeconds": role.termination_grace_period_seconds,
        "containers": [_container(job, replica, attempt, role, image, in_place=in_place, pacing=pacing)],
    }
    optional = {
        "initContainers": [_extra_container(c, role, sidecar=True) for c in role.sidecars or []]
        + [_extra_container(c, role, sidecar=False) for c in role.init_containers or []],
        "volumes": _volumes(job, uid, role),
        "imagePullSecrets": [_dump(s) for s in role.image_pull_secrets or []],
        "nodeSelector": role.node_selector,
        "tolerations": [_dump(t) for t in role.tolerations or []],
        "affinity": _dump(role.affinity),
        "topologySpreadConstraints": [_spread(c, name) for c in role.topology_spread_constraints or []],
        "serviceAccountName": role.service_account_name,
        "priorityClassName": role.priority_class_name or (scheduling.priority_class_name if scheduling else None),
        "schedulerName": scheduling.scheduler_name if scheduling else None,
        "runtimeClassName": role.runtime_class_name,
    }
    spec.update({key: value for key, value in optional.items() if value})
    return spec


def _spread(constraint: TopologySpreadConstraint, job: str) -> dict[str, Any]:
    """A topology spread constraint; without a label selector it counts the job's own pods."""
    return {"labelSelector": {"matchLabels": {JOB_LABEL: job}}, **_dump(constraint)}


def access_manifests(job: TrainingJob, uid: str, operator_namespace: str, network_policy: bool) -> list[dict[str, Any]]:
    """The job's key Secret and (unless turned off) its NetworkPolicy, created with its pods."""
    name, owner = str(job.metadata.name), owner_reference(job, uid)
    created = [access.key_secret_manifest(name, uid, owner)]
    if network_policy:
        created.append(
            access.network_policy_manifest(
                name, uid, owner, (PROGRESS_PORT, agent.AGENT_PORT), operator_namespace or None
            )
        )
    return created
