"""Pod and Service manifests: the trainer's environment, gang and queue metadata, stable names."""

from typing import Any

import pytest
from tests import builders

from trainingjob import contract
from trainingjob.manifests import MASTER_PORT, PS_PORT, pod_manifest, replicas, service_manifest
from trainingjob.model import TrainingJob
from trainingjob.naming import Replica


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


def test_a_queued_job_forms_one_kueue_pod_group_per_attempt() -> None:
    job = make_job(scheduling={"queueName": "team-a"}, workers={"replicas": 3})
    pod = pod_manifest(job, "uid", Replica("worker", 2), attempt=4)
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] == "job-4"
    assert pod["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] == "3"
    assert (
        "kueue.x-k8s.io/queue-name"
        not in pod_manifest(make_job(), "uid", Replica("worker", 0), 1)["metadata"]["labels"]
    )


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
