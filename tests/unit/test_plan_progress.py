"""Progress: rank 0's reports land in status (a step never goes back) with the percent done and the estimated
completion time (on the operator's clock, dropped once the job stops), and an attempt is restarted as Stalled
only after it reported and then went quiet for progressDeadlineSeconds."""

from dataclasses import replace
from datetime import timedelta

import pytest
from tests.support.builders import SETTINGS, at, condition, pods_of, running, seen, step, with_policy

from trainingjob.model import FailureClass, Phase, Progress
from trainingjob.plan import plan
from trainingjob.plan.estimate import percent
from trainingjob.plan.progress import changed

pytestmark = pytest.mark.fast


def test_an_attempt_that_reported_and_went_quiet_restarts_as_stalled() -> None:
    job = running(progressDeadlineSeconds=60)
    report = Progress(step=40, last_heartbeat_time=at(30), attempt=1)
    job, _ = step(job, pods_of(job, 1), at(30), progress=report)
    job, result = step(job, pods_of(job, 1), at(80), progress=report)
    assert job.status and job.status.phase == Phase.RUNNING and result.requeue_after == pytest.approx(10)
    assert job.status.progress and job.status.progress.step == 40
    job, _ = step(job, pods_of(job, 1), at(90))
    assert job.status and job.status.phase == Phase.RESTARTING and job.status.attempt == 2
    assert job.status.restarts.stalled == 1 and job.status.last_failure
    assert job.status.last_failure.failure_class == FailureClass.STALLED and job.status.last_failure.reason == "Stalled"


def test_an_attempt_whose_rank0_finished_training_is_never_stalled_while_it_waits() -> None:
    job = running(progressDeadlineSeconds=60)
    report = Progress(step=500, last_heartbeat_time=at(30), attempt=1, finished=True)
    job, _ = step(job, pods_of(job, 1), at(80), progress=report)
    assert job.status and job.status.progress and job.status.progress.finished is True
    job, _ = step(job, pods_of(job, 1), at(3600))  # worker 0 waits an hour for the slower workers
    assert job.status and job.status.phase == Phase.RUNNING and job.status.attempt == 1
    assert job.status.restarts.stalled == 0


@pytest.mark.parametrize("read_progress", [True, False], ids=["never-reported", "operator-does-not-read"])
def test_an_attempt_that_never_reports_is_never_called_stalled(read_progress: bool) -> None:
    job = running(progressDeadlineSeconds=60)
    result = plan(job, seen(pods_of(job, 1)), at(3600), replace(SETTINGS, read_progress=read_progress))
    assert result.status.phase == Phase.RUNNING and result.status.restarts.stalled == 0
    message = next(c for c in result.status.conditions if c.type == "Running").message
    assert "progressDeadlineSeconds is not enforced" in message


def test_an_earlier_attempts_report_does_not_arm_the_deadline() -> None:
    job = running(progressDeadlineSeconds=60)
    job, _ = step(job, pods_of(job, 1), at(1), progress=Progress(step=40, last_heartbeat_time=at(1), attempt=1))
    job, _ = step(job, pods_of(job, 1, {"job-worker-1-1": {"phase": "Failed", "exit_code": 75}}), at(2))
    job, _ = step(job, [], at(20))
    job, _ = step(job, pods_of(job, 2), at(21))
    job, _ = step(job, pods_of(job, 2), at(600))
    assert job.status and job.status.phase == Phase.RUNNING and job.status.attempt == 2


def test_a_new_attempts_first_report_does_not_turn_the_step_back_but_brings_its_estimate() -> None:
    job = running()
    first = Progress(step=300, total_steps=1000, last_heartbeat_time=at(1), attempt=1, metrics={"acc": 0.5},
                     first_step_time=at(0), checkpoint_stall_seconds=4.0)  # fmt: skip
    job, _ = step(job, pods_of(job, 1), at(1), progress=first)
    early = Progress(step=0, total_steps=1000, last_heartbeat_time=at(9), attempt=2, estimated_completion_time=at(900),
                     first_step_time=at(8), checkpoint_stall_seconds=0.5)  # fmt: skip
    job, _ = step(job, pods_of(job, 1), at(10), progress=early)
    assert job.status and job.status.progress and job.status.progress.step == 300
    assert job.status.progress.last_heartbeat_time == at(9) and job.status.progress.attempt == 2
    assert job.status.progress.percent == 30 and job.status.progress.metrics == {"acc": 0.5}
    assert job.status.progress.estimated_completion_time == at(900)
    assert (job.status.progress.first_step_time, job.status.progress.checkpoint_stall_seconds) == (at(8), 0.5)


def test_a_heartbeat_from_the_future_moves_the_estimate_back_as_far_and_counts_as_seen_now() -> None:
    job = running(progressDeadlineSeconds=60)
    ahead = Progress(step=1, last_heartbeat_time=at(10**7), attempt=1, estimated_completion_time=at(10**7 + 50),
                     first_step_time=at(10**7 - 3))  # fmt: skip
    job, _ = step(job, pods_of(job, 1), at(10), progress=ahead)
    assert job.status and job.status.progress and job.status.progress.last_heartbeat_time == at(10**7)
    assert job.status.progress.last_change_time == at(10)
    assert job.status.progress.estimated_completion_time == at(60) and job.status.progress.first_step_time == at(7)
    assert condition(job, "Running").status == "True"


def _report(step: int, skew: float, made: float) -> Progress:
    """Rank 0's report of `step`, made at `made` on the operator's clock by a node whose clock is `skew` s off."""
    return Progress(step=step, last_heartbeat_time=at(made + skew), attempt=1)


@pytest.mark.parametrize("skew", [-360.0, 0.0, 360.0], ids=["node-6-min-behind", "same-clock", "node-6-min-ahead"])
def test_a_job_that_keeps_reporting_is_never_stalled_whatever_its_nodes_clock(skew: float) -> None:
    job = running(progressDeadlineSeconds=60)
    for seconds in range(10, 400, 30):  # a report every 30 s, each read 1 s after it was made
        job, _ = step(job, pods_of(job, 1), at(seconds + 1), progress=_report(seconds, skew, seconds))
        assert job.status and job.status.phase == Phase.RUNNING and job.status.restarts.stalled == 0, seconds
    assert job.status and job.status.progress and job.status.progress.last_change_time == at(371)


@pytest.mark.parametrize("skew", [-360.0, 0.0, 360.0], ids=["node-6-min-behind", "same-clock", "node-6-min-ahead"])
def test_a_job_that_goes_quiet_stalls_a_deadline_after_the_operator_last_saw_news(skew: float) -> None:
    job = running(progressDeadlineSeconds=60)
    job, _ = step(job, pods_of(job, 1), at(10), progress=_report(40, skew, 9))
    job, result = step(job, pods_of(job, 1), at(50), progress=_report(40, skew, 9))  # the same report again
    assert job.status and job.status.phase == Phase.RUNNING and result.requeue_after == pytest.approx(20)
    job, _ = step(job, pods_of(job, 1), at(69.5), progress=_report(40, skew, 9))
    assert job.status and job.status.phase == Phase.RUNNING
    job, _ = step(job, pods_of(job, 1), at(70), progress=_report(40, skew, 9))
    assert job.status and job.status.phase == Phase.RESTARTING and job.status.restarts.stalled == 1


def test_when_the_report_was_last_news_survives_an_operator_restart() -> None:
    """The change time is in the status: an operator that starts after a while, reading the same silent report,
    stalls the job a deadline after the first operator saw news, not a deadline after it started itself."""
    job = running(progressDeadlineSeconds=60)
    job, _ = step(job, pods_of(job, 1), at(10), progress=_report(40, -360, 9))
    assert job.status and job.status.phase == Phase.RUNNING
    restarted = job.model_validate(job.model_dump(by_alias=True, mode="json", exclude_none=True))
    restarted, result = step(restarted, pods_of(job, 1), at(50), progress=_report(40, -360, 9))
    assert restarted.status and restarted.status.phase == Phase.RUNNING and result.requeue_after == pytest.approx(20)
    restarted, _ = step(restarted, pods_of(job, 1), at(71), progress=_report(40, -360, 9))
    assert restarted.status and restarted.status.phase == Phase.RESTARTING and restarted.status.restarts.stalled == 1


def test_a_status_an_older_operator_wrote_starts_the_deadline_when_this_operator_first_looks() -> None:
    """Its progress has only the node's heartbeat (6 minutes behind): not compared with our clock, even when the
    report cannot be read; the deadline runs from the first pass on our clock."""
    job = running(progressDeadlineSeconds=60)
    assert job.status
    old = Progress(step=40, last_heartbeat_time=at(-356), attempt=1)
    job = job.model_copy(update={"status": job.status.model_copy(update={"progress": old})})
    job, result = step(job, pods_of(job, 1), at(10))  # the report could not be read this time
    assert job.status and job.status.phase == Phase.RUNNING and result.requeue_after == pytest.approx(60)
    assert job.status.progress and job.status.progress.last_change_time == at(10)
    job, _ = step(job, pods_of(job, 1), at(70))
    assert job.status and job.status.phase == Phase.RESTARTING and job.status.restarts.stalled == 1


@pytest.mark.parametrize(
    ("later", "news"),
    [
        pytest.param({"last_heartbeat_time": at(5)}, True, id="new-heartbeat"),
        pytest.param({"step": 41}, True, id="step-on-same-heartbeat"),
        pytest.param({"attempt": 2, "step": 0}, True, id="new-attempt"),
        pytest.param({"finished": True}, True, id="finished"),
        pytest.param({}, False, id="same-report"),
        pytest.param({"step": 39}, False, id="lower-step-same-heartbeat"),
        pytest.param({"loss": 0.1}, False, id="only-loss"),
    ],
)
def test_which_reports_are_news(later: dict[str, object], news: bool) -> None:
    last = Progress(step=40, last_heartbeat_time=at(1), attempt=1, loss=0.5)
    assert changed(last.model_copy(update=later), last) is news


@pytest.mark.parametrize(
    ("done", "total", "expected"),
    [
        pytest.param(0, 400, 0, id="started"),
        pytest.param(100, 400, 25, id="a-quarter"),
        pytest.param(1, 3, 33, id="rounded-down"),
        pytest.param(999, 1000, 99, id="not-100-before-the-last-step"),
        pytest.param(1000, 1000, 100, id="done"),
        pytest.param(1500, 1000, 100, id="past-the-total"),
        pytest.param(5, 0, None, id="zero-total"),
        pytest.param(5, None, None, id="no-total"),
    ],
)
def test_percent_is_whole_percent_done(done: int, total: int | None, expected: int | None) -> None:
    assert percent(done, total) == expected


def test_the_percent_and_estimate_land_in_status_and_suspending_drops_the_estimate() -> None:
    job = running()
    report = Progress(
        step=100, total_steps=400, last_heartbeat_time=at(5), attempt=1, estimated_completion_time=at(305.75)
    )
    job, _ = step(job, pods_of(job, 1), at(6), progress=report)
    assert job.status and job.status.progress and job.status.progress.percent == 25
    assert job.status.progress.estimated_completion_time == at(305)  # to the second
    job, _ = step(with_policy(job, suspend=True), pods_of(job, 1), at(7), progress=report)
    assert job.status and job.status.phase == Phase.SUSPENDED and job.status.progress
    assert job.status.progress.estimated_completion_time is None and job.status.progress.percent == 25


def test_a_parameter_server_rank0_replaced_alone_is_not_stalled_while_gone_and_gets_a_whole_deadline() -> None:
    """Worker 0 (rank 0, whose reports are the job's progress) vanishes near the deadline: it is replaced alone, and
    neither its absence nor the wait for its first report after the replacement counts as a stall."""
    job = running(mode="ParameterServer", workers=2, servers=1, progressDeadlineSeconds=60)
    report = Progress(step=40, last_heartbeat_time=at(30), attempt=1)
    job, _ = step(job, pods_of(job, 1), at(30), progress=report)
    gone = [p for p in pods_of(job, 1) if p["metadata"]["name"] != "job-worker-0-1"]
    job, _ = step(job, gone, at(85))  # worker 0 vanished: replaced alone
    job, _ = step(job, gone, at(95))  # past the deadline from the last report, rank 0 still away
    assert job.status and job.status.phase == Phase.RUNNING and job.status.restarts.stalled == 0
    due = next(r.not_before for r in job.status.replacements if r.pod == "job-worker-0-1")
    back = pods_of(job, 1, {"job-worker-0-1": {"uid": "worker-0-again"}})
    job, _ = step(job, back, due + timedelta(seconds=59))
    assert job.status and job.status.phase == Phase.RUNNING and job.status.restarts.stalled == 0
    job, _ = step(job, back, due + timedelta(seconds=60))
    assert job.status and job.status.restarts.stalled == 1


def test_a_stall_met_in_the_pass_that_replaced_a_worker_is_decided_by_the_next_pass() -> None:
    """Parameter-server mode: worker 1 is evicted in the same pass that finds rank 0 quiet past its deadline. The
    worker's disruption is counted (replaced alone) and the stall a pass later: one count per pass, each with its
    own failure record, never two counts in the pass that starts the next attempt."""
    job = running(mode="ParameterServer", workers=2, servers=1, progressDeadlineSeconds=60)
    report = Progress(step=40, last_heartbeat_time=at(30), attempt=1)
    job, _ = step(job, pods_of(job, 1), at(30), progress=report)
    evicted = pods_of(job, 1, {"job-worker-1-1": {"phase": "Failed", "reason": "Evicted"}})
    job, _ = step(job, evicted, at(95))
    assert job.status and (job.status.attempt, job.status.restarts.disruption, job.status.restarts.stalled) == (1, 1, 0)
    job, _ = step(job, evicted, at(96))
    assert job.status and (job.status.attempt, job.status.restarts.disruption, job.status.restarts.stalled) == (2, 1, 1)
