"""A sweep trial's progress is read just after each evaluation (plan/evaluations.py), so a pruning decision reaches
it before its next one; other jobs are read as before."""

from datetime import timedelta

import pytest
from tests.support.builders import SETTINGS, T0, at, job_manifest
from tests.support.fake_cluster import FakeCluster

from trainingjob.children.progress_report import progress_from_report
from trainingjob.model import Phase, Progress, TrainingJob, TrainingJobStatus
from trainingjob.plan.evaluations import EVALUATION_MARGIN_SECONDS, MIN_READ_SECONDS, next_read
from trainingjob.reconcile.job import reconcile
from trainingjob.sweep.trials import SWEEP_LABEL

pytestmark = pytest.mark.fast

NS, NAME = "ns", "tune-0"
TOTAL, EVERY, RATE = 1000, 100, 10.0  # steps, evaluated every EVERY steps, at RATE steps a second: every 10 s
RESYNC = 60.0  # the operator's default resyncSeconds: when a job is read without anything sooner to do


def _job(*, trial: bool = True, every: int | None = EVERY) -> TrainingJob:
    trainer = {"steps": TOTAL, **({"evalEverySteps": every} if every else {})}
    manifest = job_manifest(NAME, namespace=NS, trainer=trainer)
    if trial:
        manifest["metadata"]["labels"] = {SWEEP_LABEL: "tune"}
    return TrainingJob.from_manifest(manifest)


def _status(step: int, *, eta: float | None = None, phase: Phase = Phase.RUNNING) -> TrainingJobStatus:
    left = (TOTAL - step) / RATE if eta is None else eta
    progress = Progress(step=step, total_steps=TOTAL, estimated_completion_time=T0 + timedelta(seconds=left))
    return TrainingJobStatus(phase=phase, progress=progress)


@pytest.mark.parametrize(
    ("job", "status", "expected"),
    [
        pytest.param(_job(), _status(250), 5.0 + EVALUATION_MARGIN_SECONDS, id="halfway-to-the-next-evaluation"),
        pytest.param(_job(), _status(300), 10.0 + EVALUATION_MARGIN_SECONDS, id="just-evaluated"),
        pytest.param(_job(), _status(299), MIN_READ_SECONDS, id="due-now-but-not-more-often-than-the-floor"),
        pytest.param(_job(), _status(950), 5.0 + EVALUATION_MARGIN_SECONDS, id="the-last-evaluation-at-the-end"),
        pytest.param(_job(trial=False), _status(250), None, id="not-a-trial"),
        pytest.param(_job(every=None), _status(250), None, id="no-evaluations"),
        pytest.param(_job(), _status(250, phase=Phase.SUSPENDED), None, id="not-running"),
        pytest.param(_job(), _status(250, eta=0), None, id="no-step-rate"),
        pytest.param(_job(), _status(TOTAL), None, id="done-training"),
    ],
)
def test_when_a_trials_progress_is_read_next(
    job: TrainingJob, status: TrainingJobStatus, expected: float | None
) -> None:
    assert next_read(job, status, T0) == expected


def _report(seconds: float) -> dict[str, object]:
    """What rank 0 of a trial started at T0 says `seconds` later, training at RATE steps a second."""
    step = min(TOTAL, int(seconds * RATE))
    heartbeat = (T0 + timedelta(seconds=seconds)).timestamp()
    evaluated = {"metrics": {"accuracy": step / TOTAL}, "metricsStep": step // EVERY * EVERY}
    return {
        "step": step,
        "totalSteps": TOTAL,
        "heartbeat": heartbeat,
        "attempt": 1,
        "etaSeconds": (TOTAL - step) / RATE,
        **evaluated,
    }


def test_every_evaluation_of_a_trial_is_read_within_one_evaluation_period() -> None:
    """The real reconcile of a running trial, at the moments it asks to be run again (or at the resync): each
    evaluation (every 10 s) is in its status within the margin after it; read at the resync, up to a minute."""
    now = at(0)
    cluster = FakeCluster(clock=lambda: now)
    manifest = job_manifest(NAME, namespace=NS, trainer={"steps": TOTAL, "evalEverySteps": EVERY})
    manifest["metadata"]["labels"] = {SWEEP_LABEL: "tune"}
    cluster.submit(manifest)
    reconcile(cluster, NS, NAME, now=now, settings=SETTINGS)
    for key in list(cluster.pods):
        cluster.run(*key)
    seen: dict[int, float] = {}  # evaluation step -> when the job's status first had it
    while (seconds := (now - T0).total_seconds()) < TOTAL / RATE - 1:
        cluster.reports[f"{NAME}-worker-0-1"] = progress_from_report(_report(seconds))
        outcome = reconcile(cluster, NS, NAME, now=now, settings=SETTINGS)
        progress = outcome.after.progress if outcome.after else None
        if progress is not None and progress.metrics_step:
            seen.setdefault(progress.metrics_step, seconds)
        now += timedelta(seconds=outcome.requeue_after or RESYNC)
    late = {step: seen.get(step, TOTAL / RATE) - step / RATE for step in range(EVERY, TOTAL, EVERY)}
    print(f"evaluation period {EVERY / RATE:.0f} s; read after: " + ", ".join(f"{d:.1f} s" for d in late.values()))
    assert max(late.values()) <= EVALUATION_MARGIN_SECONDS + 1.0, late  # the estimate is to the second
