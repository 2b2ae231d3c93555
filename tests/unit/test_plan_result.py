"""A Succeeded job's result: its last step and loss, final metrics, active time and last checkpoint, written as it
succeeds and never changed after; a failed job gets none (its last metrics stay in status.progress)."""

import pytest
from tests.support.builders import at, pods_of, running, step

from trainingjob.model import CheckpointStatus, Phase, Progress, TrainingJobStatus, TrainingResult
from trainingjob.plan.result import duration_seconds

pytestmark = pytest.mark.fast

CHECKPOINT = CheckpointStatus(step=100, path="/checkpoints/step-100", time=at(98))


def _finished(phase: str, exit_code: int) -> dict[str, dict[str, object]]:
    return {name: {"phase": phase, "exit_code": exit_code} for name in ("job-worker-0-1", "job-worker-1-1")}


def _final(**fields: object) -> Progress:
    report = {"step": 100, "total_steps": 100, "loss": 0.05, "last_heartbeat_time": at(99), "attempt": 1}
    return Progress.model_validate(report | fields)


def test_a_succeeded_job_records_its_result_once() -> None:
    job = running()
    final = _final(
        metrics={"accuracy": 0.97, "loss": 0.11},
        metrics_step=100,
        estimated_completion_time=at(99),
        first_step_time=at(1),
    )
    job, _ = step(job, pods_of(job, 1, _finished("Succeeded", 0)), at(100), progress=final, checkpoint=CHECKPOINT)
    assert job.status and job.status.phase == Phase.SUCCEEDED and job.status.goodput
    time = job.status.goodput
    assert (time.ratio, time.wall_seconds, time.startup_seconds, time.productive_seconds) == (0.99, 100, 1, 99)
    assert job.status.result == TrainingResult(
        step=100,
        total_steps=100,
        loss=0.05,
        metrics={"accuracy": 0.97, "loss": 0.11},
        metrics_step=100,
        duration_seconds=100,
        checkpoint=CHECKPOINT,
        goodput=time,
    )
    assert job.status.progress and job.status.progress.percent == 100
    assert job.status.progress.estimated_completion_time is None  # completionTime says when it ended
    later, _ = step(job, [], at(500), progress=_final(step=7, metrics={"accuracy": 0.1}))
    assert later.status and later.status.result == job.status.result


def test_a_job_that_never_reported_has_a_result_of_its_time_alone() -> None:
    job = running()
    job, _ = step(job, pods_of(job, 1, _finished("Succeeded", 0)), at(60))
    assert job.status and job.status.result and job.status.result.duration_seconds == 60
    time = job.status.result.goodput  # all of it starting up, as far as anyone can tell: a goodput of its own unknown
    assert time and (time.ratio, time.wall_seconds, time.startup_seconds) == (None, 60, 60)
    assert job.status.result == TrainingResult(duration_seconds=60, goodput=time)


def test_a_failed_job_has_no_result_and_keeps_its_last_metrics_in_progress() -> None:
    job = running(backoffLimit=0)
    report = _final(step=40, metrics={"accuracy": 0.8}, metrics_step=30, estimated_completion_time=at(200))
    failed = pods_of(job, 1, {"job-worker-1-1": {"phase": "Failed", "exit_code": 1}})
    job, _ = step(job, failed, at(50), progress=report)
    assert job.status and job.status.phase == Phase.FAILED and job.status.result is None
    assert job.status.progress and job.status.progress.metrics == {"accuracy": 0.8}
    assert job.status.progress.metrics_step == 30 and job.status.progress.estimated_completion_time is None


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        pytest.param(TrainingJobStatus(start_time=at(0), completion_time=at(90)), 90, id="ran-throughout"),
        pytest.param(
            TrainingJobStatus(start_time=at(0), completion_time=at(90), suspended_seconds=30), 60, id="suspended"
        ),
        pytest.param(TrainingJobStatus(start_time=at(0), completion_time=at(9.9)), 9, id="whole-seconds"),
        pytest.param(TrainingJobStatus(start_time=at(90), completion_time=at(0)), 0, id="clock-set-back"),
        pytest.param(TrainingJobStatus(completion_time=at(90)), None, id="never-started"),
        pytest.param(TrainingJobStatus(start_time=at(0)), None, id="not-finished"),
    ],
)
def test_duration_is_the_active_time_from_start_to_completion(status: TrainingJobStatus, expected: int | None) -> None:
    assert duration_seconds(status) == expected
