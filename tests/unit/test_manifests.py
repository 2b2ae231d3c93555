"""Pod and Service manifests: the trainer's environment, gang and queue metadata, stable names."""

from typing import Any

import pytest
from tests.support import builders
from tests.support.corpus_trainingjob import SPREAD, pod_fields_job, sidecar

from trainingjob.children import contract
from trainingjob.children.naming import Replica
from trainingjob.children.specs import MASTER_PORT, PS_PORT, pod_manifest, replicas, service_manifest
from trainingjob.model import TrainingJob

pytestmark = pytest.mark.fast


def make_job(uid: str = "job-uid", **spec: Any) -> TrainingJob:
    return builders.make_job(namespace="team", uid=uid, trainer={"steps": 10}, **spec)


def env_of(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"] if "value" in e}


@pytest.mark.parametrize(("index", "rank"), [(0, 0), (1, 4), (2, 8)], ids=["rank-0", "pod-1", "pod-2"])
def test_ddp_ranks_get_torchrun_variables(index: int, rank: int) -> None:
    job = make_job(workers={"replicas": 3, "nprocPerPod": 4})
    env = env_of(pod_manifest(job, "uid", Replica("worker", index), attempt=2))
    assert env[contract.WORLD_SIZE] == "12" and env[contract.RANK] == str(rank)
    assert (env[contract.PET_NNODES], env[contract.PET_NPROC_PER_NODE]) == ("3", "4")
    assert env[contract.PET_NODE_RANK] == str(index) and env[contract.ATTEMPT] == "2"
    assert env[contract.MASTER_ADDR] == "job-worker-0.job.team.svc"
    assert env[contract.MASTER_PORT] == str(MASTER_PORT)


@pytest.mark.parametrize(
    ("workers", "desired"),
    [({"replicas": 3, "nprocPerPod": 2}, None), ({"replicas": 3, "nprocPerPod": 2, "minReplicas": 1}, "6")],
    ids=["not-elastic-none", "elastic-the-full-world"],
)
def test_an_elastic_jobs_trainer_is_told_the_full_world_size(workers: dict[str, int], desired: str | None) -> None:
    env = env_of(pod_manifest(make_job(workers=workers), "uid", Replica("worker", 1), attempt=1))
    assert env.get(contract.DESIRED_WORLD_SIZE) == desired and env[contract.WORLD_SIZE] == "6"


@pytest.mark.parametrize(
    ("mode", "workers", "minimum"),
    [
        ("ParameterServer", {"replicas": 3, "minReplicas": 2}, "2"),
        ("ParameterServer", {"replicas": 3}, None),
        ("DDP", {"replicas": 3, "minReplicas": 2}, None),
    ],
    ids=["ps-min-replicas", "ps-without", "ddp-resized-instead"],
)
def test_a_parameter_server_jobs_workers_are_told_how_many_it_must_not_end_without(
    mode: str, workers: dict[str, int], minimum: str | None
) -> None:
    servers: dict[str, Any] = {"parameterServers": {"replicas": 1}} if mode == "ParameterServer" else {}
    job = make_job(mode=mode, workers=workers, **servers)
    assert env_of(pod_manifest(job, "uid", Replica("worker", 0), attempt=1)).get(contract.MIN_WORKERS) == minimum


def test_parameter_servers_are_listed_in_index_order() -> None:
    job = make_job(mode="ParameterServer", parameterServers={"replicas": 2}, workers={"replicas": 3})
    assert [str(r.role) for r in replicas(job)] == ["ps", "ps", "worker", "worker", "worker"]
    env = env_of(pod_manifest(job, "uid", Replica("ps", 1), attempt=1))
    expected = f"job-ps-0.job.team.svc:{PS_PORT},job-ps-1.job.team.svc:{PS_PORT}"
    assert env[contract.PS_ADDRS] == expected and env[contract.ROLE] == "ps" and env[contract.REPLICA_INDEX] == "1"


def test_pods_keep_their_dns_name_across_attempts_and_never_restart_themselves() -> None:
    job = make_job()
    first, second = (pod_manifest(job, "uid", Replica("worker", 1), attempt=a) for a in (1, 2))
    assert (first["metadata"]["name"], second["metadata"]["name"]) == ("job-worker-1-1", "job-worker-1-2")
    assert first["spec"]["hostname"] == second["spec"]["hostname"] == "job-worker-1"
    assert first["spec"]["subdomain"] == service_manifest(job, "uid")["metadata"]["name"] == "job"
    assert first["spec"]["restartPolicy"] == "Never"
    assert first["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] is True


def test_quantities_are_strings_and_the_checkpoint_volume_is_mounted() -> None:
    job = make_job(
        workers={"replicas": 1, "resources": {"limits": {"nvidia.com/gpu": 2, "cpu": "4"}}},
        checkpoint={"volume": {"persistentVolumeClaim": {"claimName": "ckpt"}}, "everySteps": 5},
    )
    pod = pod_manifest(job, "uid", Replica("worker", 0), attempt=1)
    container = pod["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "2", "cpu": "4"}
    assert {"name": "tj-checkpoint", "mountPath": "/checkpoints"} in container["volumeMounts"]
    assert env_of(pod)[contract.CHECKPOINT_DIR] == "/checkpoints/job/job-uid"


def test_jobs_sharing_a_volume_or_a_name_never_share_a_checkpoint_folder() -> None:
    checkpoint = {"volume": {"persistentVolumeClaim": {"claimName": "shared"}}, "everySteps": 5}
    folders = {
        env_of(pod_manifest(make_job(uid, checkpoint=checkpoint), uid, Replica("worker", 0), 1))[
            contract.CHECKPOINT_DIR
        ]
        for uid in ("uid-1", "uid-2")
    }
    assert folders == {"/checkpoints/job/uid-1", "/checkpoints/job/uid-2"}


def test_a_queued_jobs_pods_carry_no_kueue_keys() -> None:
    """The job is Kueue's as a whole (its Workload): a queue label on its pods would have Kueue's pod integration
    gate and admit them a second time."""
    job = make_job(scheduling={"queueName": "team-a"}, workers={"replicas": 3})
    pod = pod_manifest(job, "uid", Replica("worker", 2), attempt=4)
    keys = {*pod["metadata"]["labels"], *pod["metadata"]["annotations"]}
    assert not {k for k in keys if k.startswith("kueue.x-k8s.io/")}


def test_each_role_has_its_own_grace_period_and_security_context() -> None:
    job = make_job(
        mode="ParameterServer",
        parameterServers={"replicas": 1, "terminationGracePeriodSeconds": 900},
        workers={"replicas": 1, "securityContext": {"runAsUser": 2000, "addCapabilities": ["IPC_LOCK"]}},
    )
    server, worker = (pod_manifest(job, "uid", replica, attempt=1) for replica in replicas(job))
    assert (server["spec"]["terminationGracePeriodSeconds"], worker["spec"]["terminationGracePeriodSeconds"]) == (
        900,
        120,
    )
    assert (server["spec"]["securityContext"]["runAsUser"], worker["spec"]["securityContext"]["runAsUser"]) == (
        10001,
        2000,
    )
    capabilities = [pod["spec"]["containers"][0]["securityContext"]["capabilities"] for pod in (server, worker)]
    assert capabilities == [{"drop": ["ALL"]}, {"drop": ["ALL"], "add": ["IPC_LOCK"]}]


def test_a_role_without_an_image_runs_the_default_image_given() -> None:
    job = make_job(mode="ParameterServer", parameterServers={"replicas": 1, "image": "ps:1"}, workers={"replicas": 1})
    server, worker = (pod_manifest(job, "uid", r, 1, "registry.example/trainer:2") for r in replicas(job))
    assert server["spec"]["containers"][0]["image"] == "ps:1"
    assert worker["spec"]["containers"][0]["image"] == "registry.example/trainer:2"


def _pod_fields_pod(**metadata: Any) -> dict[str, Any]:
    manifest = pod_fields_job(**metadata.pop("workers", {}))
    manifest["metadata"] |= {"namespace": "team", "uid": "uid", **metadata}
    return pod_manifest(TrainingJob.model_validate(manifest), "uid", Replica("worker", 1), attempt=3)


def test_the_pod_fields_of_a_role_land_in_its_pods() -> None:
    spec = _pod_fields_pod()["spec"]
    assert spec["imagePullSecrets"] == [{"name": "registry"}] and spec["runtimeClassName"] == "nvidia"
    assert spec["securityContext"]["supplementalGroups"] == [3000, 3001]
    assert spec["containers"][0]["envFrom"] == [
        {"configMapRef": {"name": "settings"}, "prefix": "CFG_"},
        {"secretRef": {"name": "hf", "optional": True}},
    ]
    assert [c["name"] for c in spec["initContainers"]] == ["shipper", "fetch"]  # sidecars start first
    shipper, fetch = spec["initContainers"]
    assert shipper["restartPolicy"] == "Always" and "restartPolicy" not in fetch
    assert fetch["resources"] == {"limits": {"cpu": "1", "memory": "256Mi"}} and fetch["workingDir"] == "/data"
    assert fetch["envFrom"] == [{"secretRef": {"name": "s3"}}] and fetch["env"] == [
        {"name": "SOURCE", "value": "s3://bucket/set"}
    ]
    assert "env" not in shipper  # extra containers get none of the trainer's variables


def test_topology_spread_counts_the_jobs_own_pods_unless_told_otherwise() -> None:
    zone = {**SPREAD, "topologyKey": "topology.kubernetes.io/zone", "minDomains": 2}
    chosen = {**SPREAD, "labelSelector": {"matchLabels": {"team": "vision"}}}
    spread = _pod_fields_pod(workers={"topologySpreadConstraints": [zone, chosen]})["spec"]["topologySpreadConstraints"]
    assert spread == [{"labelSelector": {"matchLabels": {"trainingjob.io/job-name": "corpus"}}, **zone}, chosen]


def test_every_container_gets_a_memory_backed_dev_shm_of_the_roles_size() -> None:
    spec = _pod_fields_pod()["spec"]
    assert {"name": "tj-shm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}} in spec["volumes"]
    for container in spec["containers"] + spec["initContainers"]:
        assert {"name": "tj-shm", "mountPath": "/dev/shm"} in container["volumeMounts"], container["name"]
    default = pod_manifest(make_job(), "uid", Replica("worker", 0), 1)["spec"]["volumes"]
    assert {"name": "tj-shm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}} in default


@pytest.mark.parametrize(
    ("role", "expected"),
    [
        pytest.param({}, {}, id="restricted-like-the-trainer"),
        pytest.param(
            {"addCapabilities": ["IPC_LOCK"]}, {"capabilities": {"drop": ["ALL"], "add": ["IPC_LOCK"]}}, id="inherited"
        ),
    ],
)
def test_extra_containers_get_the_trainers_security_context(role: dict[str, Any], expected: dict[str, Any]) -> None:
    pod = _pod_fields_pod(workers={"securityContext": role})
    restricted = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    trainer = pod["spec"]["containers"][0]["securityContext"]
    assert trainer == restricted | expected
    assert all(c["securityContext"] == trainer for c in pod["spec"]["initContainers"])


def test_an_extra_container_changes_only_what_it_names() -> None:
    security = {"runAsUser": 0, "runAsNonRoot": False, "addCapabilities": []}
    pod = _pod_fields_pod(
        workers={"securityContext": {"addCapabilities": ["IPC_LOCK"]}, "sidecars": [sidecar(securityContext=security)]}
    )
    assert pod["spec"]["initContainers"][0]["securityContext"] == {
        "runAsUser": 0,
        "runAsNonRoot": False,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }


def test_pod_labels_come_from_the_job_then_the_role_and_the_operators_win() -> None:
    job_labels = {"team": "job", "owner": "ana", "trainingjob.io/role": "ps", "kueue.x-k8s.io/queue-name": "q"}
    metadata = _pod_fields_pod(labels=job_labels)["metadata"]
    labels = metadata["labels"]
    assert (labels["team"], labels["owner"], labels["trainingjob.io/role"]) == ("vision", "ana", "worker")
    assert "kueue.x-k8s.io/queue-name" not in labels  # only spec.scheduling.queueName queues the pods
    assert metadata["annotations"]["example.com/cost-center"] == "42"
    assert metadata["annotations"]["trainingjob.io/min-available"] == "2"
