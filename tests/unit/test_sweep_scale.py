"""Sweeps of thousands of trials: maxTrials up to 10,000 with names that leave room for the trial numbers; the status
lists the unfinished trials, the best and the newest finished ones and summarises the rest, so it stays under 1 MiB;
numbering, the failure budget, the ending and a grid's order go on across the summarised trials; trial messages are
capped; a status that would not fit is not written (a condition says so, once)."""

import copy
import random
from datetime import datetime
from typing import Any

import pytest
from pydantic import ValidationError
from tests.support.builders import SWEEP_UID, T0, at, make_sweep, sweep_manifest, sweep_step

from trainingjob.kube.ports import Manifest
from trainingjob.local.cluster import merge_patched
from trainingjob.model.job import MAX_NAME_LENGTH
from trainingjob.model.sweep import MAX_SWEEP_NAME_LENGTH, TrainingSweep
from trainingjob.model.sweep_status import (
    MAX_TRIAL_MESSAGE,
    SummarisedTrials,
    SweepPhase,
    TrainingSweepStatus,
    Trial,
    TrialPhase,
)
from trainingjob.reconcile import sweep as reconcile
from trainingjob.sweep import summary
from trainingjob.sweep.plan import job_name
from trainingjob.sweep.trial_jobs import trial_manifest
from trainingjob.sweep.trials import Child, child, ended

pytestmark = pytest.mark.fast
RANDOM: dict[str, Any] = {"search": {"algorithm": "Random"}}


def _finished(number: int, objective: float, phase: TrialPhase = TrialPhase.SUCCEEDED, message: str = "") -> Trial:
    return Trial(
        number=number,
        job_name=job_name("sweep", number),
        parameters={"lr": 0.01, "batch": 16},
        phase=phase,
        objective=objective,
        message=message,
        start_time=T0,
        completion_time=T0,
    )


def _with(sweep: TrainingSweep, trials: list[Trial], summarised: SummarisedTrials | None = None) -> TrainingSweep:
    status = TrainingSweepStatus(phase=SweepPhase.RUNNING, trials=trials, summarised=summarised)
    return sweep.model_copy(update={"status": status})


@pytest.mark.parametrize(
    ("name_length", "max_trials", "accepted"),
    [
        pytest.param(MAX_SWEEP_NAME_LENGTH, 1000, True, id="longest-name-three-digit-numbers"),
        pytest.param(MAX_SWEEP_NAME_LENGTH, 1001, False, id="longest-name-four-digit-numbers"),
        pytest.param(MAX_SWEEP_NAME_LENGTH - 1, 10_000, True, id="shorter-name-ten-thousand"),
        pytest.param(20, 10_001, False, id="over-ten-thousand"),
    ],
)
def test_max_trials_reaches_ten_thousand_while_every_trial_job_name_fits(
    name_length: int, max_trials: int, accepted: bool
) -> None:
    manifest = sweep_manifest("s" * name_length, maxTrials=max_trials, **RANDOM)
    if accepted:
        sweep = TrainingSweep.from_manifest(manifest)
        assert len(job_name(str(sweep.metadata.name), max_trials - 1)) == MAX_NAME_LENGTH
    else:
        with pytest.raises(ValidationError):
            TrainingSweep.from_manifest(manifest)


def test_past_kept_finished_the_oldest_are_summarised_and_numbering_goes_on() -> None:
    rng = random.Random(7)
    trials = [_finished(n, rng.random()) for n in range(summary.KEPT_FINISHED + 100)]
    best = max(trials[:50], key=lambda t: t.objective or 0.0).model_copy(update={"objective": 2.0})
    trials[best.number] = best  # the best among the oldest: listed all the same
    sweep, result = sweep_step(_with(make_sweep(parallelism=2, maxTrials=1000, **RANDOM), trials), [])
    assert sweep.status is not None and sweep.status.summarised is not None
    listed = {t.number for t in sweep.status.trials}
    started = summary.KEPT_FINISHED + 100
    assert [t.number for t in result.create] == [started, started + 1]
    assert best.number in listed and sweep.status.best_trial is not None
    assert sweep.status.best_trial.number == best.number
    assert sum(t.phase.is_finished for t in sweep.status.trials) == summary.KEPT_FINISHED + 1
    assert set(range(started - summary.KEPT_FINISHED, started)) <= listed
    assert sweep.status.summarised.succeeded == 99 and sweep.status.counts.succeeded == started
    left_out = [t.objective or 0.0 for t in trials if t.number not in listed]
    assert sweep.status.summarised.objective_max == max(left_out)
    assert sweep.status.summarised.objective_mean == pytest.approx(sum(left_out) / len(left_out))


def test_summarised_failures_count_against_max_failed_trials() -> None:
    sweep = _with(
        make_sweep(parallelism=1, maxTrials=100, maxFailedTrials=3, **RANDOM),
        [_finished(3, 0.5, TrialPhase.FAILED)],
        SummarisedTrials(failed=3),
    )
    ended_sweep, result = sweep_step(sweep, [])
    assert ended_sweep.status is not None and ended_sweep.status.phase == SweepPhase.FAILED
    assert "4 trials failed" in ended_sweep.status.conditions[-1].message and not result.create


def test_the_sweep_ends_once_listed_and_summarised_trials_reach_the_budget() -> None:
    sweep = _with(
        make_sweep(parallelism=2, maxTrials=10, **RANDOM),
        [_finished(8, 0.5), _finished(9, 0.7, TrialPhase.PRUNED)],
        SummarisedTrials(succeeded=6, failed=1, pruned=1),
    )
    done, result = sweep_step(sweep, [])
    assert done.status is not None and done.status.phase == SweepPhase.SUCCEEDED and not result.create
    assert "all 10 trials finished" in done.status.conditions[-1].message


def _succeeded_job(sweep: TrainingSweep, trial: Trial, final: float) -> Child:
    manifest = trial_manifest(sweep, trial)
    manifest["metadata"].update(uid=f"job-{trial.number}", creationTimestamp=T0.isoformat())
    manifest["status"] = {"phase": "Succeeded", "result": {"metrics": {"accuracy": final}, "metricsStep": 100}}
    return child(manifest)


def test_a_grid_runs_each_combination_once_across_summarised_trials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(summary, "KEPT_FINISHED", 4)
    lr = {"name": "lr", "path": "trainer.learningRate", "type": "Float", "min": 0.1, "max": 1.0, "step": 0.1}
    batch = {"name": "batch", "path": "trainer.batchSize", "type": "Categorical", "values": [16, 32, 64]}
    manifest = sweep_manifest(
        parameters=[lr, batch], parallelism=3, maxTrials=30, search={"algorithm": "Grid", "seed": 3}
    )
    manifest["metadata"].update(namespace="ns", uid=SWEEP_UID, generation=1, resourceVersion="1")
    sweep = TrainingSweep.from_manifest(manifest)
    run: list[tuple[Any, ...]] = []
    for second in range(40):
        assert sweep.status is None or len(sweep.status.trials) <= 4 + 3 + 1
        jobs = [_succeeded_job(sweep, t, random.Random(t.number).random()) for t in _unfinished(sweep)]
        sweep, result = sweep_step(sweep, jobs, at(second))
        run += [tuple(sorted(t.parameters.items())) for t in result.create]
    assert sweep.status is not None and sweep.status.phase == SweepPhase.SUCCEEDED
    assert len(run) == 30 and len(set(run)) == 30, "a combination ran twice, or one never ran"
    assert sweep.status.summarised is not None and summary.total(sweep.status) == 30


def _unfinished(sweep: TrainingSweep) -> list[Trial]:
    return [t for t in sweep.status.trials if not t.phase.is_finished] if sweep.status else []


def test_a_trial_message_is_capped() -> None:
    long = "x" * (4 * MAX_TRIAL_MESSAGE)
    trial = ended(_finished(0, 0.1, TrialPhase.RUNNING), TrialPhase.FAILED, "JobFailed", long, T0)
    assert trial.message == long[:MAX_TRIAL_MESSAGE]


def test_the_status_of_ten_thousand_trials_with_long_messages_stays_under_a_mebibyte() -> None:
    words = "y" * MAX_TRIAL_MESSAGE
    trials = [
        _finished(n, n / 10_000, TrialPhase.FAILED if n % 2 else TrialPhase.SUCCEEDED, words) for n in range(10_000)
    ]
    sweep = _with(make_sweep(parallelism=100, maxTrials=10_000, maxFailedTrials=10_000, **RANDOM), trials)
    done, _ = sweep_step(sweep, [])
    assert done.status is not None and done.status.phase == SweepPhase.SUCCEEDED
    assert summary.status_bytes(done.status) < summary.STATUS_LIMIT_BYTES
    assert done.status.counts.succeeded == 5_000 and done.status.counts.failed == 5_000
    assert done.status.best_trial is not None and done.status.best_trial.number == 9_998


class Sweeps:
    """One sweep in memory, its status written through merge patches; jobs created are only counted."""

    def __init__(self, sweep: Manifest) -> None:
        self.sweep, self.writes, self.created = sweep, 0, 0

    def read_sweep(self, namespace: str, name: str) -> Manifest | None:
        return copy.deepcopy(self.sweep)

    def list_trial_jobs(self, namespace: str, sweep: str) -> list[Manifest]:
        return []

    def write_sweep_status(self, namespace: str, name: str, resource_version: str, patch: Manifest) -> str:
        self.writes += 1
        self.sweep["status"] = merge_patched(self.sweep.get("status") or {}, patch)
        self.sweep["metadata"]["resourceVersion"] = str(int(resource_version) + 1)
        return str(self.sweep["metadata"]["resourceVersion"])

    def create_job(self, namespace: str, manifest: Manifest) -> str | None:
        self.created += 1
        return None

    def suspend_job(self, namespace: str, name: str) -> None:
        raise AssertionError("nothing to stop")

    def delete_job(self, namespace: str, name: str, uid: str) -> None:
        raise AssertionError("nothing to delete")


def test_a_status_that_would_not_fit_is_not_written_and_a_condition_says_so_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    manifest = sweep_manifest(parallelism=3, **RANDOM)
    manifest["metadata"].update(namespace="ns", uid=SWEEP_UID, generation=1, resourceVersion="1")
    cluster = Sweeps(manifest)
    monkeypatch.setattr(reconcile, "STATUS_LIMIT_BYTES", 600)  # three new trials' status takes more
    now: datetime = at(1)
    outcome = reconcile.reconcile_sweep(cluster, "ns", "sweep", now=now)
    assert cluster.created == 0 and cluster.writes == 1
    assert outcome.after is not None and not outcome.after.trials
    running = next(c for c in outcome.after.conditions if c.type.value == "Running")
    assert running.reason == "StatusTooLarge" and "over the 600" in running.message
    reconcile.reconcile_sweep(cluster, "ns", "sweep", now=at(2))
    assert cluster.writes == 1, "the same refusal was written again"
    monkeypatch.setattr(reconcile, "STATUS_LIMIT_BYTES", summary.STATUS_LIMIT_BYTES)
    reconcile.reconcile_sweep(cluster, "ns", "sweep", now=at(3))
    assert cluster.created == 3 and cluster.sweep["status"]["conditions"][0]["reason"] == "TrialsRunning"
