"""Parameter-server mode in real containers: a worker's container is killed and only that worker is replaced;
the servers and the other workers keep their pods, and the job reaches its accuracy. A worker's trainer killed
inside its healthy pod restarts in it instead (its agent, a gang of one): no pod deleted or created."""

import signal

import pytest
from testbed.harness import Harness
from testbed.node import NodeTier
from testbed.node_cluster import signal_container, signal_trainer
from testbed.node_jobs import apply_claim, example, pod_of, result_accuracy

pytestmark = pytest.mark.node


def test_a_killed_worker_is_replaced_alone(node_tier: NodeTier, nh: Harness) -> None:
    apply_claim(nh, "digits-ps-checkpoints.yaml")
    job = example("digits-ps.yaml")[0]
    job["spec"]["trainer"]["steps"] = 5000  # worker-2 must still run when the kill comes
    job["spec"]["checkpoint"]["everySteps"] = 600  # the servers save during the run, not only as it ends
    name = job["metadata"]["name"]
    nh.create(job)

    # Killed once its container runs (the pod watch says so at once), not after the status shows training: worker 0's
    # progress reaches the status on a reconcile, and worker 2 had trained all its steps by then on a fresh clone.
    nh.wait(name, lambda j: (j.get("status", {}).get("workers") or {}).get("ready") == 3, "3 ready workers", 300)
    before = {p.metadata.name: p.metadata.uid for p in nh.pods(name)}
    signal_container(node_tier, pod_of(nh, name, "worker", 2, attempt=1), signal.SIGKILL)

    done = nh.wait_phase(name, "Succeeded", timeout=600)["status"]
    assert done["attempt"] == 1, done
    assert done["restarts"]["retryable"] == 1, done["restarts"]
    assert done["lastFailure"]["exitCode"] == 137 and "worker-2" in done["lastFailure"]["pod"], done["lastFailure"]
    after = {p.metadata.name: p.metadata.uid for p in nh.pods(name)}
    killed = pod_of(nh, name, "worker", 2, attempt=1).metadata.name
    assert after[killed] != before[killed], "the killed worker was not replaced"
    assert {pod: uid for pod, uid in after.items() if pod != killed} == {
        pod: uid for pod, uid in before.items() if pod != killed and pod in after
    }, "a pod other than the killed worker was replaced"
    assert result_accuracy(done) >= 0.93
    # The servers' checkpoints reach the status through worker 0, named by the job's step (at most its 5000 steps;
    # three workers push to each shard, so its version runs about three times as far).
    checkpoint = done.get("lastCheckpoint") or {}
    assert "/ps-" in checkpoint.get("path", "") and 0 < checkpoint.get("step", 0) <= 5000, checkpoint


def test_a_killed_worker_trainer_restarts_in_its_pod(node_tier: NodeTier, nh: Harness) -> None:
    apply_claim(nh, "digits-ps-checkpoints.yaml")
    job = example("digits-ps.yaml")[0]
    job["spec"]["trainer"]["steps"] = 5000  # worker-2 must still run when the kill comes
    name = job["metadata"]["name"]
    nh.create(job)
    nh.wait(name, lambda j: (j.get("status", {}).get("workers") or {}).get("ready") == 3, "3 ready workers", 300)
    uids = sorted(p.metadata.uid for p in nh.pods(name))
    signal_trainer(node_tier, pod_of(nh, name, "worker", 2, attempt=1), signal.SIGKILL)

    done = nh.wait_phase(name, "Succeeded", timeout=600)["status"]
    assert (done["attempt"], done["inPlaceRestarts"], done["restarts"]["retryable"]) == (1, 1, 1), done
    assert done["lastFailure"]["exitCode"] == 137 and done["lastFailure"]["reason"] == "TrainerFailed", done
    # cleanPodPolicy stops the servers once the job succeeded, so some pods may be gone by now: none may be new
    assert {p.metadata.uid for p in nh.pods(name)} <= set(uids), "a pod was created"
    assert result_accuracy(done) >= 0.93
