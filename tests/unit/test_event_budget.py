"""Routine Events from one budget for the operator (runtime/event_budget.py): a burst of jobs writes a burst of them
at most, then one a second; every other Event is written whatever the budget holds."""

import pytest
from tests.support.builders import T0, job_manifest
from tests.support.fake_cluster import FakeCluster

from trainingjob.plan import Event
from trainingjob.runtime.cached import CachedCluster
from trainingjob.runtime.event_budget import Bucket, EventBudget
from trainingjob.runtime.memory import Stores

pytestmark = pytest.mark.fast
CREATED = Event("Normal", "JobCreated", "Creating the pods of attempt 1.")
RUNNING = Event("Normal", "AllReplicasRunning", "All 8 pods of attempt 1 are running.")
SUCCEEDED = Event("Normal", "JobSucceeded", "The job succeeded.")
FAILED = Event("Warning", "RetryableFailure", "worker 1 exited with code 1.")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("bucket", "now", "granted", "left"),
    [
        pytest.param(Bucket(3, 10, burst=3, rate=1), 10, True, 2, id="full"),
        pytest.param(Bucket(0.5, 10, burst=3, rate=1), 10, False, 0.5, id="empty"),
        pytest.param(Bucket(0, 10, burst=3, rate=1), 12, True, 1, id="refilled-by-time"),
        pytest.param(Bucket(0, 10, burst=3, rate=1), 1000, True, 2, id="refilled-to-the-burst-at-most"),
        pytest.param(Bucket(0, 10, burst=3, rate=0.5), 13, True, 0.5, id="at-its-rate"),
        pytest.param(Bucket(0.5, 10, burst=3, rate=1), 5, False, 0.5, id="a-clock-gone-back-refills-nothing"),
    ],
)
def test_a_bucket_grants_a_token_it_holds(bucket: Bucket, now: float, granted: bool, left: float) -> None:
    after, got = bucket.take(now)
    assert got == granted and after.tokens == pytest.approx(left)
    assert after.at == max(now, bucket.at)  # time never runs back: a later call refills from the latest seen


def test_a_burst_of_routine_events_writes_the_burst_then_one_a_second() -> None:
    clock = Clock()
    budget = EventBudget(burst=3, per_second=1, clock=clock)
    kept, skipped = budget.admit([CREATED] * 5)
    assert (len(kept), len(skipped)) == (3, 2)
    clock.now += 2.5
    kept, skipped = budget.admit([RUNNING] * 5)
    assert (len(kept), len(skipped)) == (2, 3)


def test_every_other_event_is_written_when_the_budget_is_spent() -> None:
    budget = EventBudget(burst=1, per_second=0, clock=Clock())
    kept, skipped = budget.admit([CREATED, FAILED, RUNNING, SUCCEEDED, Event("Warning", "JobCreated", "odd")])
    assert kept == [CREATED, FAILED, SUCCEEDED, Event("Warning", "JobCreated", "odd")]
    assert skipped == [RUNNING]


def test_the_cached_cluster_writes_what_the_budget_admits_and_reports_the_rest() -> None:
    """Through the operator's write path: two jobs' creation, a budget of one: the second job's JobCreated reaches no
    apiserver, and is reported (the operator counts it in trainingjob_events_skipped_total)."""
    cluster, reported = FakeCluster(clock=lambda: T0), list[Event]()
    cached = CachedCluster(
        cluster, Stores(), budget=EventBudget(burst=1, per_second=0, clock=Clock()), on_skipped=reported.append
    )
    first, second = job_manifest("first"), job_manifest("second")
    for job, uid in ((first, "u1"), (second, "u2")):
        job["metadata"] |= {"namespace": "ns", "uid": uid}
    cached.emit(first, [CREATED])
    cached.emit(second, [CREATED, FAILED])
    assert cluster.events == [("first", CREATED), ("second", FAILED)]
    assert reported == [CREATED]
