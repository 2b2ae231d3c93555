"""status.goodput through the planner: refreshed on a pass that writes the status anyway or once it is a minute old,
never a write of its own before that, and kept as it was once the job has finished."""

import pytest
from tests.support.builders import T0, at, make_job, pods_of, running, step

from trainingjob.model import Phase, Progress, TrainingJob

pytestmark = pytest.mark.fast


def _created_at(job: TrainingJob, seconds: float) -> TrainingJob:
    stamp = at(seconds).isoformat()
    return job.model_copy(update={"metadata": job.metadata.model_copy(update={"creation_timestamp": stamp})})


def _report(step: int, seconds: float) -> Progress:
    return Progress(step=step, last_heartbeat_time=at(seconds), attempt=1, first_step_time=at(1))


@pytest.mark.parametrize(
    ("later", "report", "refreshed"),
    [
        pytest.param(30, None, False, id="nothing-else-changed"),
        pytest.param(30, _report(20, 29), True, id="written-anyway"),
        pytest.param(59, None, False, id="not-yet-a-minute-old"),
        pytest.param(61, None, True, id="a-minute-old"),
    ],
)
def test_a_running_jobs_goodput_is_refreshed_when_due(later: float, report: Progress | None, refreshed: bool) -> None:
    job = _created_at(running(), -3)
    job, _ = step(job, pods_of(job, 1), at(1), progress=_report(0, 1))
    assert job.status and job.status.goodput and job.status.goodput.time == at(1)
    after, _ = step(job, pods_of(job, 1), at(later), progress=report)
    assert after.status and after.status.goodput
    assert after.status.goodput.time == (at(later) if refreshed else at(1))
    if not refreshed:
        assert after.status == job.status  # nothing to write
    else:
        assert after.status.goodput.wall_seconds == later + 3 and after.status.goodput.queued_seconds == 3


def test_a_finished_jobs_goodput_stays_as_it_ended_and_its_result_keeps_it() -> None:
    job = _created_at(running(), 0)
    job, _ = step(job, pods_of(job, 1), at(1), progress=_report(0, 1))
    done = pods_of(job, 1, {n: {"phase": "Succeeded", "exit_code": 0} for n in ("job-worker-0-1", "job-worker-1-1")})
    job, _ = step(job, done, at(50), progress=_report(100, 49))
    assert job.status and job.status.phase == Phase.SUCCEEDED and job.status.goodput and job.status.result
    assert (job.status.goodput.wall_seconds, job.status.goodput.productive_seconds) == (50, 49)
    assert job.status.result.goodput == job.status.goodput
    later, _ = step(job, [], at(5000))
    assert later.status == job.status


def test_a_job_not_yet_started_has_its_queueing_counted() -> None:
    job, _ = step(_created_at(make_job(), -10), [])
    assert job.status and job.status.goodput and job.status.goodput.time == T0  # written with the first pods
    assert (job.status.goodput.wall_seconds, job.status.goodput.queued_seconds, job.status.goodput.ratio) == (10, 10, 0)
