"""Goodput: a job's wall time split into queued, startup, productive, checkpoint stall, recovery, redone, shrunk and
suspended from its history (children/goodput.py), parts that always add up to the wall time."""

import math
from datetime import datetime

import pytest
from hypothesis import given, settings
from tests.support.builders import T0, at
from tests.support.histories import WORKED_EXAMPLE, attempt_record, histories, many_attempts, status_of

from trainingjob.children import goodput
from trainingjob.model import AttemptOutcome, AttemptRecord, EarlierAttempts, History, TrainingJobStatus

pytestmark = pytest.mark.fast

FAILED, SUSPENDED, SUCCEEDED = AttemptOutcome.FAILED, AttemptOutcome.SUSPENDED, AttemptOutcome.SUCCEEDED


@pytest.mark.parametrize(
    ("status", "now", "expected"),
    [
        pytest.param(WORKED_EXAMPLE, 40, {"queued": 2, "startup": 3, "recovery": 12, "redone": 12, "productive": 11},
                     id="worked-example"),
        pytest.param(
            status_of(
                attempt_record(1, 0, 26, pods=0, first=4, heartbeat=24, last_step=20, checkpoint_stall_seconds=2.0),
                attempt_record(2, 26, 55, pods=30, first=32, heartbeat=52, resumed_from_step=10, last_step=30),
                attempt_record(3, 55, pods=56, first=60, resumed_from_step=25, last_step=35),
            ),
            80,
            # attempt 2 redoes 10 of its 20 steps, attempt 3 5 of its 10; each failure's tail after the last
            # heartbeat is recovery with the backoff and the start
            {"startup": 4, "checkpoint_stall": 2, "productive": 18 + 10 + 10, "redone": 10 + 10, "recovery": 8 + 8},
            id="two-failures-and-resumes",
        ),
        pytest.param(
            status_of(
                attempt_record(1, 0, 11, pods=1, first=3, heartbeat=10, last_step=7),
                attempt_record(2, 11, in_place=True, first=13, resumed_from_step=7, last_step=12),
            ),
            20,
            {"queued": 1, "startup": 2, "productive": 7 + 7, "recovery": 3},
            id="restarted-in-place",
        ),
        pytest.param(
            status_of(
                attempt_record(1, 0, 20, SUSPENDED, pods=2, first=4, heartbeat=18, last_step=16),
                attempt_record(2, 50, pods=52, first=55, resumed_from_step=16, last_step=20),
            ),
            60,
            {"queued": 2, "startup": 2, "productive": 16 + 5, "suspended": 30, "recovery": 5},
            id="suspended-and-resumed",
        ),
        pytest.param(
            status_of(attempt_record(1, 0, 20, SUSPENDED, pods=2, first=4, heartbeat=18, last_step=16)),
            35,
            {"queued": 2, "startup": 2, "productive": 16, "suspended": 15},
            id="suspended-now",
        ),
        pytest.param(
            status_of(
                attempt_record(1, 0, 10, pods=1, first=3, heartbeat=10, last_step=7),
                attempt_record(2, 10, 12, SUSPENDED),  # suspended in its backoff: resuming keeps its number
                attempt_record(2, 30, pods=31, first=33, resumed_from_step=7, last_step=9),
            ),
            40,
            {"queued": 1, "startup": 2, "productive": 7 + 7, "recovery": 2 + 3, "suspended": 18},
            id="suspended-in-a-backoff",
        ),
        pytest.param(status_of(), 30, {"queued": 30}, id="queued"),
        pytest.param(status_of(attempt_record(1, 5)), 30, {"queued": 30}, id="queued-for-pods"),
        pytest.param(
            status_of(attempt_record(1, 100, pods=101, first=105, last_step=5)), 110, {"queued": 101, "startup": 4,
                                                                               "productive": 5},
            id="queued-suspended-by-kueue",
        ),
        pytest.param(status_of(attempt_record(1, 0, pods=1)), 10, {"queued": 1, "startup": 9}, id="no-first-step-yet"),
        pytest.param(
            status_of(attempt_record(1, 0, 20, SUCCEEDED, pods=1, first=3, heartbeat=15, last_step=100), completed=20),
            500,
            {"queued": 1, "startup": 2, "productive": 17},  # to its end: the final checkpoint and evaluation
            id="succeeded",
        ),
        pytest.param(
            status_of(attempt_record(1, 0, 12, pods=1, first=3, heartbeat=10, last_step=7), completed=12),
            99,
            {"queued": 1, "startup": 2, "productive": 7, "recovery": 2},
            id="failed",
        ),
        pytest.param(
            status_of(
                attempt_record(1, 0, 20, SUCCEEDED, pods=1, first=3, last_step=20, checkpoint_stall_seconds=1.0,
                               workers=1, desired_workers=4),
                completed=20,
            ),
            30,
            # of 16 s of work at 1 of 4 workers, a quarter is productive: the missing three's share is shrunk
            {"queued": 1, "startup": 2, "checkpoint_stall": 1, "productive": 4, "shrunk": 12},
            id="shrunk-to-a-quarter",
        ),
        pytest.param(
            status_of(
                attempt_record(1, 0, 12, pods=1, first=3, heartbeat=12, last_step=9),
                attempt_record(2, 12, pods=13, first=15, resumed_from_step=6, last_step=12, workers=2,
                               desired_workers=4),
            ),
            21,
            # attempt 2 redoes 3 of its 6 steps (3 s); half the other 3 s is shrunk
            {"queued": 1, "startup": 2, "productive": 9 + 1.5, "recovery": 3, "redone": 3, "shrunk": 1.5},
            id="redone-then-shrunk",
        ),
    ],
)  # fmt: skip
def test_the_split(status: TrainingJobStatus, now: float, expected: dict[str, float]) -> None:
    found = goodput.split(status, T0, at(now))
    assert {part: seconds for part, seconds in found.seconds().items() if seconds} == pytest.approx(expected)


def test_the_worked_example_has_a_goodput_of_0_275() -> None:
    found = goodput.goodput(WORKED_EXAMPLE, T0, at(40))
    assert (found.ratio, found.wall_seconds, found.productive_seconds, found.time) == (0.275, 40, 11, at(40))


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        pytest.param(status_of(), 0.0, id="queued"),
        pytest.param(WORKED_EXAMPLE.model_copy(update={"progress": None}), None, id="never-reported"),
        pytest.param(TrainingJobStatus(history=WORKED_EXAMPLE.history), None, id="never-reported-either"),
        pytest.param(
            status_of(attempt_record(1, 0, 20, SUSPENDED, pods=0, first=0, last_step=20)), 1.0, id="suspended-left-out"
        ),
    ],
)
def test_the_ratio(status: TrainingJobStatus, expected: float | None) -> None:
    assert goodput.goodput(status, T0, at(40)).ratio == expected


def test_the_axis_starts_at_creation_or_at_the_first_attempt_whichever_is_earlier() -> None:
    assert goodput.axis(at(-5), WORKED_EXAMPLE, at(40)) == (at(-5), at(40))
    assert goodput.axis(at(3), WORKED_EXAMPLE, at(40)) == (T0, at(40))  # the clocks disagree a little
    assert goodput.axis(None, status_of(completed=50), at(90)) == (at(90), at(90))  # no creation time: nothing yet


@pytest.mark.parametrize(
    ("exact", "whole"),
    [
        pytest.param(
            {"productive": 10.4, "recovery": 2.3, "startup": 0.3},
            {"productive": 11, "recovery": 2},
            id="the-largest-fraction-up",
        ),
        pytest.param({"productive": 0.4, "queued": 0.4}, {"queued": 1}, id="a-tie-to-the-earlier-part"),
        pytest.param({"productive": 5.5, "queued": 2.5}, {"productive": 5, "queued": 3}, id="halves"),
        pytest.param({"queued": 2.5}, {"queued": 3}, id="half-a-second-up"),
        pytest.param({"queued": 3.0}, {"queued": 3}, id="exact"),
    ],
)
def test_whole_seconds_add_up_to_the_wall_rounded(exact: dict[str, float], whole: dict[str, int]) -> None:
    found = goodput.whole_seconds(goodput.Split(**exact))
    assert {part: seconds for part, seconds in found.items() if seconds} == whole


def test_creation_time_is_read_from_metadata_or_a_manifest() -> None:
    stamp = "2026-01-01T00:00:00+00:00"
    assert goodput.creation_time({"creationTimestamp": stamp}) == T0
    assert goodput.creation_time({"creationTimestamp": "yesterday"}) is None
    assert goodput.creation_time(object()) is None


@settings(deadline=None, max_examples=300)
@given(histories())
def test_the_parts_never_go_below_zero_and_always_add_up_to_the_wall_time(
    history: tuple[TrainingJobStatus, datetime, datetime],
) -> None:
    status, created, now = history
    start, end = goodput.axis(created, status, now)
    found = goodput.split(status, created, now)
    assert all(seconds >= 0 for seconds in found.seconds().values()), found
    assert found.wall == pytest.approx((end - start).total_seconds(), abs=1e-6)
    ratio = found.ratio
    assert ratio is None or 0 <= ratio <= 1
    whole = goodput.whole_seconds(found)
    assert sum(whole.values()) == math.floor(found.wall + 0.5)
    assert all(whole[part] >= 0 and abs(whole[part] - seconds) < 1 for part, seconds in found.seconds().items())
    stored = goodput.goodput(status, created, now)
    assert stored.wall_seconds == sum(whole.values()) and stored.productive_seconds == whole["productive"]


def test_the_times_are_clamped_onto_the_axis_in_order() -> None:
    """A trainer whose clock is behind: its first step before the pods, its heartbeat before its first step."""
    record = attempt_record(2, 10, 30, pods=12, first=5, heartbeat=4)
    times = goodput.attempt_times(record, at(15), at(25))
    assert (times.start, times.pods, times.first_step, times.trained_until, times.end) == (
        at(15), at(15), at(15), at(15), at(25),
    )  # fmt: skip
    assert times.accounted == at(15)
    assert goodput.attempt_times(attempt_record(1, 0, pods=1), T0, at(9)).accounted == at(
        9
    )  # no first step: to its end


def _with_history(records: list[AttemptRecord], earlier: EarlierAttempts | None = None) -> TrainingJobStatus:
    """A status with these records, however many (History.model_construct: no 32-attempt limit)."""
    return status_of().model_copy(update={"history": History.model_construct(attempts=records, earlier=earlier)})


@pytest.mark.parametrize("dropped", [1, 6, 7, 8, 20], ids=lambda n: f"{n}-dropped")
def test_attempts_dropped_from_the_history_keep_their_share_of_the_split(dropped: int) -> None:
    """Folded into `earlier` in one go or attempt by attempt, at any boundary (a suspension across it too), the
    split is the one of the whole history."""
    records, created, now = many_attempts(40), at(-5), at(500)
    whole = goodput.split(_with_history(records), created, now)
    at_once = History.model_construct(attempts=records)
    earlier = goodput.earlier_attempts(at_once, dropped, created, at(400))
    assert earlier.attempts == dropped
    kept = _with_history(records[dropped:], earlier)
    assert goodput.split(kept, created, now).seconds() == pytest.approx(whole.seconds())
    one_by_one = None
    for number in range(dropped):
        history = History.model_construct(attempts=records[number:], earlier=one_by_one)
        one_by_one = goodput.earlier_attempts(history, 1, created, at(400))
    assert goodput.split(_with_history(records[dropped:], one_by_one), created, now).seconds() == pytest.approx(
        whole.seconds()
    )
    assert goodput.axis(created, kept, now) == (created, now)
