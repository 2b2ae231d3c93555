"""Local mode for sweeps with the real trainer: trials are local jobs run by the job planner, never more at once
than the sweep's parallelism, and a pruned trial's processes are stopped (its job suspended, or deleted)."""

import json
from pathlib import Path
from typing import Any

import pytest
from tests.support.builders import job_manifest, sweep_manifest

from trainingjob.local.sweep import LocalSweep
from trainingjob.model.sweep_status import SweepPhase, TrialPhase

pytestmark = pytest.mark.e2e

STEPS = 1000  # long enough that a trial stopped early visibly stops: the pruned one is stopped near step 50
# Grid order: a learning rate that learns within 50 steps, then one that cannot (adam at 1e-5 stays near chance).
GOOD_THEN_HOPELESS = [{"name": "lr", "path": "trainer.learningRate", "type": "Categorical", "values": [0.01, 1e-5]}]


def _sweep(action: str) -> dict[str, Any]:
    template = job_manifest(workers={"replicas": 1}, trainer={"steps": STEPS, "evalEverySteps": 50, "batchSize": 64})
    template["spec"]["trainer"]["optimizer"] = "adam"
    return sweep_manifest(
        "local-sweep",
        parameters=GOOD_THEN_HOPELESS,
        template={"spec": template["spec"]},
        search={"algorithm": "Grid"},
        earlyStopping={"algorithm": "Median", "startupTrials": 1, "action": action},
        maxTrials=2,
        parallelism=1,
    )


def _live(sweep: LocalSweep) -> set[str]:
    return {name for name, job in sweep.jobs.items() if any(p.process.poll() is None for p in job.pods.values())}


@pytest.mark.parametrize("action", ["Suspend", "Delete"])
def test_a_hopeless_trial_is_pruned_and_its_processes_stop(tmp_path: Path, action: str) -> None:
    sweep = LocalSweep(_sweep(action), tmp_path)
    running: list[set[str]] = []
    status = sweep.run(on_status=lambda _: running.append(_live(sweep)))
    assert status is not None and status.phase == SweepPhase.SUCCEEDED, status
    good, hopeless = status.trials
    assert good.phase == TrialPhase.SUCCEEDED and good.objective is not None and good.objective > 0.9
    assert hopeless.phase == TrialPhase.PRUNED and hopeless.reason == "PrunedByMedian", hopeless
    assert hopeless.objective_step is not None and hopeless.objective_step < STEPS  # stopped early, not at the end
    assert status.best_trial is not None and status.best_trial.number == 0
    assert max(len(live) for live in running) == 1  # parallelism 1: never two trials' processes at once
    assert not _live(sweep)  # nothing left running
    jobs = {job["metadata"]["name"]: job for job in sweep.list_trial_jobs("local", "local-sweep")}
    if action == "Suspend":  # the job and its history stay
        assert jobs["local-sweep-1"]["spec"]["runPolicy"]["suspend"] is True
        assert jobs["local-sweep-1"]["status"]["phase"] == "Suspended"
    else:
        assert set(jobs) == {"local-sweep-0"}
    report = json.loads((tmp_path / "local-sweep-1" / "logs" / "local-sweep-1-worker-0-1.progress.json").read_text())
    assert report["step"] < STEPS and report["exitCode"] == 79  # the trainer stopped early, told to (SIGTERM)
