"""The product's core promise in real containers: a DDP rank dies, the gang restarts as the next attempt and
resumes from the newest complete checkpoint on a PersistentVolume, and the job still reaches its accuracy."""

import signal
import time

import pytest
from testbed.harness import Harness
from testbed.node import NodeTier
from testbed.node_cluster import signal_container
from testbed.node_jobs import (
    apply_claim,
    checkpoint_steps,
    example,
    log_of,
    pod_of,
    result_accuracy,
    resumed_steps,
)

pytestmark = pytest.mark.node


def test_a_killed_rank_restarts_the_gang_from_the_newest_checkpoint(node_tier: NodeTier, nh: Harness) -> None:
    volume = apply_claim(nh, "digits-ddp-checkpoints.yaml")
    job = example("digits-ddp.yaml")[0]
    job["spec"]["trainer"]["steps"] = 3000  # long enough to be killed part-way on a fast machine
    name = job["metadata"]["name"]
    nh.create(job)

    checkpointed = nh.wait(
        name, lambda j: (j.get("status", {}).get("lastCheckpoint") or {}).get("step", 0) >= 200, "a checkpoint", 300
    )["status"]["lastCheckpoint"]["step"]
    killed_at = time.monotonic()
    signal_container(node_tier, pod_of(nh, name, "worker", 1, attempt=1), signal.SIGKILL)

    nh.wait_running_pods(name, 2, attempt=2, timeout=120)
    restarted_in = time.monotonic() - killed_at
    done = nh.wait_phase(name, "Succeeded", timeout=600)["status"]

    assert done["attempt"] == 2, done
    # The root cause is the killed rank (137), whichever the kubelet reported first; the rank that saw its peer die
    # (75), when its pod failed too, is named as a consequence.
    last = done["lastFailure"]
    assert (last["attempt"], last["exitCode"], last["pod"]) == (1, 137, f"{name}-worker-1-1"), last
    assert last.get("consequences", "") in ("", "worker-0 exited 75 because a peer was lost"), last
    assert done["restarts"]["retryable"] == 1, done["restarts"]
    assert checkpoint_steps(volume)[-1] == 3000, checkpoint_steps(volume)  # the final one, on the volume
    assert done["lastCheckpoint"]["step"] == 3000, done["lastCheckpoint"]  # from rank 0's last words
    rank0 = log_of(nh, pod_of(nh, name, "worker", 0, attempt=2))
    resumed = resumed_steps(rank0)
    assert resumed and resumed[0] >= checkpointed, f"attempt 2 did not resume from step >= {checkpointed}:\n{rank0}"
    assert result_accuracy(done) >= 0.95
    first, second = done["history"]["attempts"]  # what the dashboard and `tjctl timeline` draw
    assert (first["outcome"], first["reason"], second["outcome"]) == ("Failed", "Retryable", "Succeeded"), done
    assert second["resumedFromStep"] >= checkpointed and second["runningTime"] <= second["endTime"], second
    points = done["history"]["points"]
    assert points and points[-1]["step"] <= 3000 and len(points) <= 128, points[-3:]
    print(f"gang running again {restarted_in:.1f} s after the kill; resumed from step {resumed[0]}")
