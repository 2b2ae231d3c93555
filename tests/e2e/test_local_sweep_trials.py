"""Local mode for sweeps with the real trainer: trials are local jobs run by the job planner, never more at once
than the sweep's parallelism, and a pruned trial's processes are stopped (its job suspended, or deleted). Each
trial holds after its evaluation at step HOLD (the trainer's test hook) until the sweep has judged it: a verdict
reaches the trainer before its last step however fast it trains (see tests/e2e/test_local_sweep.py)."""

import json
from pathlib import Path
from typing import Any

import pytest
from tests.support.builders import job_manifest, sweep_manifest

from trainer.faults import HOLD_AFTER_EVALUATION
from trainingjob.local.sweep import LocalSweep
from trainingjob.model.sweep_status import SweepPhase, TrainingSweepStatus, TrialPhase

pytestmark = pytest.mark.e2e

STEPS = 1000  # long enough that a trial stopped early visibly stops: the pruned one is stopped near step 50
HOLD = 750  # an evaluation step at one of the sixteenths of the run its curve is taken at (12/16 of 1000)
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


def _judged_while_held(sweep: LocalSweep, status: TrainingSweepStatus) -> set[tuple[int, int]]:
    """(trial, the last step of its curve) of the trials whose process holds as the sweep judges them."""
    holding = {name for name, job in sweep.jobs.items() if job.stopped_pods()}
    return {(t.number, t.curve[-1].step) for t in status.trials if t.job_name in holding and t.curve}


@pytest.mark.parametrize("action", ["Suspend", "Delete"])
def test_a_hopeless_trial_is_pruned_and_its_processes_stop(
    tmp_path: Path, action: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(HOLD_AFTER_EVALUATION, str(HOLD))  # the trials' processes inherit it
    sweep = LocalSweep(_sweep(action), tmp_path)
    running: list[set[str]] = []
    judged: set[tuple[int, int]] = set()

    def seen(status: TrainingSweepStatus) -> None:
        running.append(_live(sweep))
        judged.update(_judged_while_held(sweep, status))

    status = sweep.run(on_status=seen)
    assert status is not None and status.phase == SweepPhase.SUCCEEDED, status
    good, hopeless = status.trials
    assert good.phase == TrialPhase.SUCCEEDED and good.objective is not None and good.objective > 0.9
    assert hopeless.phase == TrialPhase.PRUNED and hopeless.reason == "PrunedByMedian", hopeless
    assert hopeless.objective_step is not None and hopeless.objective_step < STEPS  # stopped early, not at the end
    assert status.best_trial is not None and status.best_trial.number == 0
    assert max(len(live) for live in running) == 1  # parallelism 1: never two trials' processes at once
    assert not _live(sweep)  # nothing left running
    assert (0, HOLD) in judged  # the good trial went on past its hold only after the sweep judged that evaluation
    jobs = {job["metadata"]["name"]: job for job in sweep.list_trial_jobs("local", "local-sweep")}
    if action == "Suspend":  # the job and its history stay
        assert jobs["local-sweep-1"]["spec"]["runPolicy"]["suspend"] is True
        assert jobs["local-sweep-1"]["status"]["phase"] == "Suspended"
    else:
        assert set(jobs) == {"local-sweep-0"}
    report = json.loads((tmp_path / "local-sweep-1" / "logs" / "local-sweep-1-worker-0-1.progress.json").read_text())
    assert report["step"] < STEPS and report["exitCode"] == 79  # the trainer stopped early, told to (SIGTERM)
