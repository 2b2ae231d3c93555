"""Job statuses by their history, for the goodput split and the timeline: attempt records at seconds after T0, the
goodput docstring's worked example, and random histories (any times a trainer might report, even out of order)."""

from datetime import datetime
from typing import Any

from hypothesis import strategies as st
from tests.support.builders import at

from trainingjob.model import AttemptOutcome, AttemptRecord, History, Progress, TrainingJobStatus

_TIMES = {"pods": "pods_time", "first": "first_step_time", "heartbeat": "last_heartbeat_time"}


def attempt_record(number: int, start: float, end: float | None = None, outcome: AttemptOutcome | None = None,
                   **fields: Any) -> AttemptRecord:  # fmt: skip
    """An attempt record (Failed when it has an end and no outcome); pods, first and heartbeat in seconds after T0,
    other fields as the record's."""
    named = {_TIMES.get(k, k): at(v) if k in _TIMES else v for k, v in fields.items()}
    ended = {"end_time": at(end), "outcome": outcome or AttemptOutcome.FAILED} if end is not None else {}
    return AttemptRecord(attempt=number, start_time=at(start), **ended, **named)


def status_of(*attempts: AttemptRecord, completed: float | None = None) -> TrainingJobStatus:
    """A status with these attempts and a progress report (so its goodput is known)."""
    return TrainingJobStatus(
        history=History(attempts=list(attempts)),
        progress=Progress(step=1),
        completion_time=at(completed) if completed is not None else None,
    )


# children/goodput.py's worked example, a step a second: three failures, each restart resumed behind the job's
# furthest step; 40 s after T0 it has had 11 s of productive training.
WORKED_EXAMPLE = status_of(
    attempt_record(1, 0, 9, pods=2, first=5, heartbeat=9, last_step=4),
    attempt_record(2, 9, 20, pods=10, first=13, heartbeat=20, resumed_from_step=0, last_step=7),
    attempt_record(3, 20, 29, pods=21, first=24, heartbeat=29, resumed_from_step=2, last_step=7),
    attempt_record(4, 29, pods=30, first=33, resumed_from_step=4, last_step=11),
)


def many_attempts(count: int, suspended: int = 7) -> list[AttemptRecord]:
    """Attempts one after another, 10 s each, each training from 3 s to 8 s after it began and failing at 10 s (the
    job 5 steps further each time, each resuming 2 steps behind); attempt `suspended` is suspended instead and the
    next one begins 30 s later; the last still runs."""
    records, start = [], 0.0
    for number in range(1, count + 1):
        outcome = AttemptOutcome.SUSPENDED if number == suspended else AttemptOutcome.FAILED
        end = None if number == count else start + 10
        resumed = 5 * number - 7 if number > 1 else None
        times = {"pods": start + 1, "first": start + 3, "heartbeat": start + 8}
        records.append(attempt_record(number, start, end, outcome, **times, last_step=5 * number,
                                      resumed_from_step=resumed))  # fmt: skip
        start += 10 + (30 if number == suspended else 0)
    return records


_SECONDS = st.integers(0, 100)


@st.composite
def histories(draw: st.DrawFn) -> tuple[TrainingJobStatus, datetime, datetime]:
    """(status, creation time, now): up to 6 attempts one after another, each with any of its times (anywhere),
    steps and stall, any outcome; the last maybe running; the job maybe finished."""
    created, t = at(draw(st.integers(-50, 50))), float(draw(_SECONDS))
    attempts = []
    count = draw(st.integers(0, 6))
    for number in range(1, count + 1):
        start = t
        t += draw(_SECONDS)
        named = ("pods_time", "first_step_time", "last_heartbeat_time")
        maybe = {name: at(draw(st.floats(-20, 300))) for name in named if draw(st.booleans())}
        steps = {name: draw(st.integers(0, 500)) for name in ("resumed_from_step", "last_step") if draw(st.booleans())}
        stall = {"checkpoint_stall_seconds": draw(st.floats(0, 200))} if draw(st.booleans()) else {}
        sizes = ("workers", "desired_workers")
        shrunk = {name: draw(st.integers(0, 8)) for name in sizes} if draw(st.booleans()) else {}
        last = number == count and draw(st.booleans())
        ended = {} if last else {"end_time": at(t), "outcome": draw(st.sampled_from(AttemptOutcome))}
        record = AttemptRecord(attempt=number, start_time=at(start), in_place=draw(st.booleans()) or None,
                               **maybe, **steps, **stall, **shrunk, **ended)  # fmt: skip
        attempts.append(record)
    done = at(t + draw(_SECONDS)) if attempts and attempts[-1].end_time and draw(st.booleans()) else None
    progress = Progress(step=1) if draw(st.booleans()) else None
    status = TrainingJobStatus(history=History(attempts=attempts), completion_time=done, progress=progress)
    return status, created, at(t + draw(st.integers(-10, 100)))
