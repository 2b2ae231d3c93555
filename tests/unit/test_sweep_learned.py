"""The learners see every finished trial: the summarised (no longer listed) ones' records read back as the trials
were (parameters within their ranges and steps, the objective, the curve at float16 precision), within their byte
budget; the median rule stops a trial that trails summarised trials, and TPE draws what it draws with every trial
listed."""

import math
from datetime import timedelta
from typing import Any

import pytest
from tests.support.builders import SWEEP_UID, T0, sweep_manifest, sweep_step, trial_job

from trainingjob.model.sweep import TrainingSweep
from trainingjob.model.sweep_status import ObjectivePoint, SummarisedTrials, TrainingSweepStatus, Trial, TrialPhase
from trainingjob.sweep import learned, summary
from trainingjob.sweep.learned import appended, record, unpacked
from trainingjob.sweep.sampling import next_parameters
from trainingjob.sweep.trials import marks

pytestmark = pytest.mark.fast

PARAMETERS: list[dict[str, Any]] = [
    {"name": "lr", "path": "trainer.learningRate", "type": "Float", "min": 0.0001, "max": 0.3, "log": True},
    {"name": "momentum", "path": "trainer.momentum", "type": "Float", "min": 0.1, "max": 0.9, "step": 0.1},
    {"name": "accumulate", "path": "trainer.gradientAccumulationSteps", "type": "Int", "min": 1, "max": 64},
    {"name": "batch", "path": "trainer.batchSize", "type": "Categorical", "values": [16, 32, 64]},
]
TOTAL = 100  # the template's trainer.steps (tests/support/builders)


def _sweep(**spec: Any) -> TrainingSweep:
    manifest = sweep_manifest(parameters=PARAMETERS, **spec)
    manifest["metadata"].update(namespace="ns", uid=SWEEP_UID, generation=1, resourceVersion="1")
    return TrainingSweep.from_manifest(manifest)


SPEC = _sweep().spec
VALUES = {"lr": 0.3, "momentum": 0.7000000000000001, "accumulate": 17, "batch": 64}


def _curve(steps: list[int], start: float = 0.1) -> list[ObjectivePoint]:
    return [ObjectivePoint(step=s, value=start + 0.01 * i) for i, s in enumerate(steps)]


def _trial(number: int, phase: TrialPhase = TrialPhase.SUCCEEDED, **fields: Any) -> Trial:
    values: dict[str, Any] = {"parameters": VALUES, "objective": 0.875, "total_steps": TOTAL}
    if phase.is_finished:
        values["completion_time"] = T0
    values.update(fields)
    return Trial(number=number, job_name=f"sweep-{number}", phase=phase, **values)


@pytest.mark.parametrize(
    "trial",
    [
        pytest.param(_trial(7, curve=_curve(marks(TOTAL))), id="succeeded-16-sixteenths"),
        pytest.param(_trial(7, TrialPhase.PRUNED, curve=_curve(marks(TOTAL)[:3]), objective=0.2), id="pruned-early"),
        pytest.param(_trial(7, TrialPhase.PRUNED, objective=None), id="pruned-before-any-evaluation"),
        pytest.param(_trial(9999, curve=_curve(marks(640)), total_steps=640), id="its-own-total-steps"),
        pytest.param(_trial(7, curve=_curve([3, 10, 70]), total_steps=None), id="steps-without-a-total"),
        pytest.param(_trial(7, parameters={**VALUES, "lr": 0.0001, "batch": 16}), id="range-ends"),
    ],
)
def test_a_record_reads_back_as_the_trial_was(trial: Trial) -> None:
    (back,) = unpacked(SPEC, appended(SPEC, None, [trial]))
    assert (back.number, back.phase) == (trial.number, trial.phase)
    assert back.objective == (None if trial.objective is None else pytest.approx(trial.objective, rel=1e-6))
    assert back.parameters == pytest.approx(trial.parameters, rel=1e-6)
    assert SPEC.parameters[2].name == "accumulate" and isinstance(back.parameters["accumulate"], int)
    assert [p.step for p in back.curve] == [p.step for p in trial.curve]
    assert [p.value for p in back.curve] == pytest.approx([p.value for p in trial.curve], rel=1e-3)


@pytest.mark.parametrize(
    "trial",
    [
        pytest.param(_trial(1, TrialPhase.FAILED), id="failed"),
        pytest.param(_trial(1, objective=None), id="succeeded-without-objective"),
        pytest.param(_trial(1, parameters={"lr": 0.1}), id="parameters-not-the-specs"),
    ],
)
def test_a_trial_the_learners_cannot_use_has_no_record(trial: Trial) -> None:
    assert record(SPEC, trial) is None and appended(SPEC, None, [trial]) is None


def test_past_the_budget_a_record_goes_without_its_curve_then_not_at_all(monkeypatch: pytest.MonkeyPatch) -> None:
    whole = record(SPEC, _trial(0, curve=_curve(marks(TOTAL))))
    bare = record(SPEC, _trial(0))
    assert whole is not None and bare is not None
    budget = 4 * math.ceil((2 * len(whole) + len(bare)) / 3)  # room for two whole records and one bare one
    monkeypatch.setattr(learned, "LEARNED_BUDGET_BYTES", budget)
    trials = [_trial(n, curve=_curve(marks(TOTAL))) for n in range(5)]
    back = unpacked(SPEC, appended(SPEC, None, trials))
    assert [(t.number, len(t.curve)) for t in back] == [(0, 16), (1, 16), (2, 0)]


def test_every_record_fits_the_budget_at_10000_trials_of_four_parameters() -> None:
    trials = [_trial(n, curve=_curve(marks(TOTAL))) for n in range(10_000)]
    back = unpacked(SPEC, appended(SPEC, None, trials))
    assert len(back) == 10_000 and all(len(t.curve) == 16 for t in back)


MEDIAN = {"earlyStopping": {"algorithm": "Median", "startupTrials": 3}, "search": {"algorithm": "Random"}}


def _summarised_then_listed(sweep: TrainingSweep, old: list[Trial], listed: list[Trial]) -> TrainingSweep:
    """The sweep's status with `old` summarised (as compaction leaves them) and `listed` listed."""
    before = summary.summarised(sweep.spec, None, old)
    status = TrainingSweepStatus(trials=listed, summarised=before)
    return sweep.model_copy(update={"status": status})


def test_the_median_rule_stops_a_trial_that_trails_the_summarised_trials() -> None:
    """Listed, only poor succeeded trials (0.1): alone they would not stop a trial at 0.3; the summarised ones
    (0.9) do."""
    sweep = _sweep(maxTrials=100, parallelism=1, **MEDIAN)
    good = [_trial(n, curve=_curve(marks(TOTAL), 0.9), objective=0.9) for n in range(10)]
    poor = [_trial(n, curve=_curve(marks(TOTAL), 0.1), objective=0.1) for n in range(10, 13)]
    running = _trial(13, TrialPhase.RUNNING, start_time=T0)
    sweep = _summarised_then_listed(sweep, good, [*poor, running])
    job = trial_job(sweep, 3, curve=dict.fromkeys(marks(TOTAL)[:4], 0.3))
    after, _ = sweep_step(sweep, [job], T0 + timedelta(seconds=1))
    assert after.status is not None
    (judged,) = [t for t in after.status.trials if t.number == 13]
    assert judged.phase == TrialPhase.PRUNED and judged.reason == "PrunedByMedian", judged


def test_tpe_draws_with_summarised_trials_what_it_draws_with_them_all_listed() -> None:
    sweep = _sweep(maxTrials=100, search={"algorithm": "TPE", "startupTrials": 2, "seed": 5})
    trials = [
        _trial(n, parameters={**VALUES, "lr": 0.0001 * 1.3**n, "batch": [16, 32, 64][n % 3]}, objective=n * 7 % 30 / 30)
        for n in range(30)  # no two objectives alike: a record's float32 objective ranks as its trial's did
    ]
    everything = next_parameters(sweep.spec, trials, 2)
    records = unpacked(sweep.spec, summary.summarised(sweep.spec, None, trials[:25]).learned)
    with_records = next_parameters(sweep.spec, trials[25:], 2, summarised=25, learned=records)
    without = next_parameters(sweep.spec, trials[25:], 2, summarised=25)
    assert [p["batch"] for p in with_records] == [p["batch"] for p in everything]
    assert [p["lr"] for p in with_records] == pytest.approx([p["lr"] for p in everything], rel=1e-4)
    assert without != everything  # the five listed alone teach it something else


def test_compaction_records_what_it_summarises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(summary, "KEPT_FINISHED", 2)
    trials = [_trial(n, curve=_curve(marks(TOTAL))) for n in range(5)]
    listed, kept = summary.compacted(SPEC, trials, SummarisedTrials(), keep=set())
    assert [t.number for t in listed] == [3, 4] and kept is not None
    assert [t.number for t in unpacked(SPEC, kept.learned)] == [0, 1, 2]
