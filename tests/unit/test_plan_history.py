"""status.history, written by the planner: attempts and how they ended, failures, checkpoints, and curves that keep
a fixed size while spanning the whole run."""

import itertools
from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.builders import T0, at, pods_of, running, step, with_policy
from tests.support.histories import many_attempts

from trainingjob.children import goodput
from trainingjob.model import (
    AttemptOutcome,
    CheckpointStatus,
    FailureClass,
    History,
    LastFailure,
    MetricPoint,
    Phase,
    Progress,
    TrainingJobStatus,
    WorkerScale,
)
from trainingjob.plan.history import added, record

pytestmark = pytest.mark.fast


def test_a_run_that_fails_once_and_succeeds_is_told_attempt_by_attempt() -> None:
    job = running()
    job, _ = step(job, pods_of(job, 1), at(5))  # all ranks running
    failed = pods_of(job, 1, {"job-worker-1-1": {"phase": "Failed", "exit_code": 137, "reason": "OOMKilled"}})
    job, _ = step(job, failed, at(10))
    job, _ = step(job, [], at(20))  # the backoff: no pods yet
    job, _ = step(job, pods_of(job, 2, phase="Pending"), at(30))
    job, _ = step(job, pods_of(job, 2), at(40))
    done = pods_of(job, 2, {n: {"phase": "Succeeded", "exit_code": 0} for n in ("job-worker-0-2", "job-worker-1-2")})
    job, _ = step(job, done, at(50))
    assert job.status and job.status.phase == Phase.SUCCEEDED and job.status.history
    first, second = job.status.history.attempts
    assert (first.attempt, first.outcome, first.reason, first.end_time) == (
        1,
        AttemptOutcome.FAILED,
        "OOMKilled",
        at(10),
    )
    assert first.start_time == T0 and first.running_time is not None and first.running_time <= at(5)
    assert (second.attempt, second.start_time, second.pods_time, second.running_time) == (2, at(10), at(30), at(40))
    assert (second.outcome, second.end_time) == (AttemptOutcome.SUCCEEDED, at(50))
    (failure,) = job.status.history.failures
    assert (failure.pod, failure.attempt, failure.failure_class.value, failure.exit_code) == (
        "job-worker-1-1", 1, "OOMKilled", 137,
    )  # fmt: skip


def test_suspending_ends_the_attempt_and_resuming_begins_the_next() -> None:
    job = running()
    job, _ = step(with_policy(job, suspend=True), pods_of(job, 1), at(10))
    assert job.status and job.status.history
    assert [(r.attempt, r.outcome) for r in job.status.history.attempts] == [(1, AttemptOutcome.SUSPENDED)]
    job, _ = step(with_policy(job, suspend=False), [], at(100))
    attempts = job.status.history.attempts if job.status and job.status.history else []
    assert [(r.attempt, r.outcome, r.start_time) for r in attempts] == [
        (1, AttemptOutcome.SUSPENDED, T0), (2, None, at(100)),
    ]  # fmt: skip


def test_nothing_new_writes_nothing_new() -> None:
    job = running()
    again, _ = step(job, pods_of(job, 1), at(5))
    once_more, _ = step(again, pods_of(job, 1), at(9))
    assert once_more.status and again.status and once_more.status.history == again.status.history


def test_checkpoints_and_progress_become_history_once_each() -> None:
    job = running()
    checkpoint = CheckpointStatus(step=100, path="/checkpoints/step-100", time=at(4))
    report = Progress(step=100, loss=0.5, samples_per_second=800.0, last_heartbeat_time=at(4), attempt=1,
                      metrics={"accuracy": 0.9}, metrics_step=100)  # fmt: skip
    for now in (5, 6):
        job, _ = step(job, pods_of(job, 1), at(now), progress=report, checkpoint=checkpoint)
    history = job.status.history if job.status else None
    assert history is not None and history.checkpoints == [checkpoint]
    assert [(p.step, p.loss, p.samples_per_second) for p in history.points] == [(100, 0.5, 800.0)]
    assert [(e.step, e.metrics) for e in history.evaluations] == [(100, {"accuracy": 0.9})]


def test_each_attempt_keeps_what_its_rank_0_reported_of_it() -> None:
    """Its first step's time (within the attempt), how far the job got, its heartbeat and its checkpoint stall; the
    last words of a failed rank 0 land on its attempt as it ends, not on the next."""
    job = running()
    early = Progress(
        step=40, last_heartbeat_time=at(8), attempt=1, first_step_time=at(-30), checkpoint_stall_seconds=1.5
    )
    checkpoint = CheckpointStatus(step=30, path="/c/step-30", time=at(9))  # the newest the operator will have seen
    job, _ = step(job, pods_of(job, 1), at(10), progress=early, checkpoint=checkpoint)
    last_words = Progress(
        step=90, last_heartbeat_time=at(19), attempt=1, first_step_time=at(2), checkpoint_stall_seconds=3.0
    )
    failed = pods_of(job, 1, {"job-worker-0-1": {"phase": "Failed", "exit_code": 1}})
    job, _ = step(job, failed, at(20), progress=last_words)
    assert job.status and job.status.history and job.status.history.attempts[-1].resumed_from_step == 30
    resumed = Progress(step=60, last_heartbeat_time=at(45), attempt=2, first_step_time=at(50), resumed_from_step=60)
    job, _ = step(job, pods_of(job, 2), at(40), progress=resumed)  # its clock is 5 s ahead of ours
    attempts = job.status.history.attempts if job.status and job.status.history else []
    got = [(r.resumed_from_step, r.first_step_time, r.last_step, r.last_heartbeat_time, r.checkpoint_stall_seconds)
           for r in attempts]  # fmt: skip
    assert got == [
        (None, T0, 90, at(19), 3.0),  # the first step no earlier than the attempt began; the rest as last reported
        (60, at(40), 90, at(40), None),  # where its trainer resumed (a checkpoint the operator missed); its first
        # step no later than now; the furthest step
    ]  # fmt: skip


def test_an_attempt_with_fewer_workers_than_asked_records_how_many_for_the_goodput_split() -> None:
    def scaled(status: TrainingJobStatus, current: int) -> TrainingJobStatus:
        scale = WorkerScale(current=current, desired=4, workers=f"{current}/4", reason="CapacityLost", since=at(0))
        return status.model_copy(update={"scale": scale})

    began = record(TrainingJobStatus(), scaled(TrainingJobStatus(attempt=1), 2), at(0))
    assert began.history and [(a.workers, a.desired_workers) for a in began.history.attempts] == [(2, 4)]
    full = record(began, scaled(began, 4), at(5))
    assert full.history and [(a.workers, a.desired_workers) for a in full.history.attempts] == [(None, None)]
    assert record(full, full, at(6)) == full


def test_attempts_past_the_limit_leave_their_share_of_the_goodput_split_behind() -> None:
    """The 33rd attempt begins: the 1st leaves the list for history.earlier, and the split stays the whole one."""
    records = many_attempts(32)
    before = TrainingJobStatus(phase=Phase.RUNNING, attempt=32, history=History(attempts=records), progress=Progress())
    failure = LastFailure(pod="job-worker-0-32", attempt=32, failure_class=FailureClass.RETRYABLE, reason="Error",
                          time=at(319))  # fmt: skip
    after = before.model_copy(update={"attempt": 33, "phase": Phase.RESTARTING, "last_failure": failure})
    recorded = record(before, after, at(320), created=at(-5)).history
    assert recorded and [r.attempt for r in recorded.attempts] == list(range(2, 34))
    assert recorded.earlier and (recorded.earlier.attempts, recorded.earlier.start) == (1, at(-5))
    whole = History.model_construct(attempts=[records[0], *recorded.attempts])
    now = at(330)
    kept = goodput.split(after.model_copy(update={"history": recorded}), at(-5), now)
    assert kept.seconds() == pytest.approx(
        goodput.split(after.model_copy(update={"history": whole}), at(-5), now).seconds()
    )


def _point(step: int) -> MetricPoint:
    return MetricPoint(step=step, time=datetime(2026, 1, 1), loss=1.0 / (step + 1))


@pytest.mark.parametrize(
    ("steps", "every", "expected", "expected_every"),
    [
        ([1, 2, 3], 1, [1, 2, 3], 1),
        ([1, 2, 2], 1, [1, 2], 1),  # the same step twice: kept once
        ([10, 11, 20], 5, [10, 20], 5),  # closer than `every`: left out
        ([10, 20, 30, 15], 1, [10, 15], 1),  # a resume from step 15 redoes the steps after it
        ([1, 2, 3, 4, 5], 1, [1, 3, 5], 2),  # past the limit (4): every other point goes, the spacing doubles
    ],
    ids=["appends", "same-step", "too-close", "resume-truncates", "thins"],
)
def test_added(steps: list[int], every: int, expected: list[int], expected_every: int) -> None:
    series: list[MetricPoint] = []
    for number in steps:
        series, every = added(series, every, _point(number), limit=4)
    assert ([p.step for p in series], every) == (expected, expected_every)


@settings(deadline=None)  # up to 2,000 points an example: Hypothesis' 200 ms per example would time the machine
@given(st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=2000), st.integers(1, 32))
def test_a_curve_stays_small_ordered_and_spans_the_run(gaps: list[int], half: int) -> None:
    limit = 2 * half  # the history's limits are even: the first point and the newest both stay
    series: list[MetricPoint] = []
    every, step_now = 1, 0
    for gap in gaps:
        step_now += gap
        series, every = added(series, every, _point(step_now), limit)
    steps = [p.step for p in series]
    assert len(steps) <= limit and steps == sorted(set(steps))
    assert steps[0] == gaps[0]  # the first point is always kept
    assert step_now - steps[-1] < every  # the newest point is never further back than the spacing
    assert all(b - a >= every for a, b in itertools.pairwise(steps))  # evenly spread


@pytest.mark.parametrize("spacing", [7, 60, 1000], ids=lambda spacing: f"every-{spacing}-steps")
def test_a_curve_seen_further_apart_than_its_spacing_stays_even(spacing: int) -> None:
    # Reconciles see evaluations further apart than the series' own spacing: thinning must not leave the old part
    # sparse and the new part dense (early stopping compares trials along these curves).
    series: list[MetricPoint] = []
    every = 1
    for number in range(1, 501):
        series, every = added(series, every, _point(spacing * number), limit=64)
    gaps = {b.step - a.step for a, b in itertools.pairwise(series)}
    assert len(series) > 32 and gaps == {every}, (sorted(gaps), every)
