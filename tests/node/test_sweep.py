"""The shipped sweep on a real node: its trials are TrainingJobs whose pods run our trainer image, report their
evaluations, and the operator ranks them (the example as written, with fewer trials to keep the tier short)."""

from typing import Any

import pytest
from testbed.harness import Harness
from testbed.node import NodeTier
from testbed.node_jobs import example
from testbed.processes import poll_until

from trainingjob.model import GROUP, VERSION
from trainingjob.model.sweep import SWEEP_PLURAL

pytestmark = pytest.mark.node

TRIALS = 4  # TPE's first four (random, seeded) trials of the example: one of them is above 0.97


def test_the_digits_sweep_runs_its_trials_on_a_real_node_and_names_the_best(node_tier: NodeTier, nh: Harness) -> None:
    (sweep,) = example("digits-sweep.yaml")
    sweep["spec"]["maxTrials"] = TRIALS
    name = sweep["metadata"]["name"]
    nh.custom.create_namespaced_custom_object(GROUP, VERSION, nh.ns, SWEEP_PLURAL, sweep)

    def ended() -> dict[str, Any] | None:
        found = nh.custom.get_namespaced_custom_object(GROUP, VERSION, nh.ns, SWEEP_PLURAL, name)
        status: dict[str, Any] = found.get("status") or {}
        return status if status.get("phase") in ("Succeeded", "Failed") else None

    try:
        status = poll_until(ended, timeout=420, interval=2, what="the sweep ended")
    except TimeoutError:
        print(nh.operator.log_tail())
        raise
    assert status["phase"] == "Succeeded", status
    assert len(status["trials"]) == TRIALS and status["counts"]["failed"] == 0, status["trials"]
    assert status["bestTrial"]["objective"] > 0.97, status["bestTrial"]
    best = nh.job(status["bestTrial"]["jobName"])
    assert best["status"]["result"]["metrics"]["accuracy"] == status["bestTrial"]["objective"]
    assert best["spec"]["trainer"]["learningRate"] == status["bestTrial"]["parameters"]["lr"]
    running = [t for t in status["trials"] if t["phase"] == "Succeeded"]
    assert all(t["curve"] for t in running), running  # evaluations during training reached the sweep
