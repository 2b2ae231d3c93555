"""A restart in place in real containers: a DDP rank's trainer process is SIGKILLed inside its healthy pod, its
agent reports it, the operator orders attempt 2, and every pod's agent starts its trainer again from a warm spare:
the same pods (same UIDs) train on from the newest complete checkpoint to the job's accuracy."""

import signal
import time

import pytest
from testbed.harness import Harness
from testbed.node import NodeTier
from testbed.node_cluster import signal_trainer
from testbed.node_jobs import apply_claim, at_step, example, pod_of, result_accuracy

pytestmark = pytest.mark.node


def test_a_killed_trainer_restarts_the_gang_in_its_pods(node_tier: NodeTier, nh: Harness) -> None:
    apply_claim(nh, "digits-ddp-checkpoints.yaml")
    job = example("digits-ddp.yaml")[0]
    job["spec"]["trainer"]["steps"] = 3000
    name = job["metadata"]["name"]
    nh.create(job)
    report = at_step(nh, name, 1, 200, timeout=300)
    checkpoint = int(report.get("lastCheckpointStep", 0))
    uids = sorted(p.metadata.uid for p in nh.pods(name))
    killed = time.monotonic()
    signal_trainer(node_tier, pod_of(nh, name, "worker", 1, attempt=1), signal.SIGKILL)
    resumed = at_step(nh, name, 2, checkpoint + 1, timeout=120, pods_attempt=1)
    back_in = time.monotonic() - killed
    assert resumed["resumedFromStep"] >= checkpoint, resumed
    done = nh.wait_phase(name, "Succeeded", timeout=600)["status"]
    assert (done["attempt"], done["podsAttempt"], done["inPlaceRestarts"]) == (2, 1, 1), done
    assert done["lastFailure"]["exitCode"] == 137 and done["lastFailure"]["pod"] == f"{name}-worker-1-1", done
    assert sorted(p.metadata.uid for p in nh.pods(name)) == uids, "a pod was deleted or created"
    assert done["history"]["attempts"][-1]["inPlace"] is True
    assert result_accuracy(done) >= 0.95
    print(f"every rank trained past step {checkpoint} again {back_in:.1f} s after the kill (backoff included)")
