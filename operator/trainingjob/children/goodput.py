"""Goodput: where a job's wall time went, in totals. Pure: split(status, created, now) reads status.history (each
attempt's times, where it resumed from, how far the job got, its first step, last heartbeat and checkpoint stall)
and cuts the job's time axis, from its creation to its completion (or `now`), into parts that add up to it:

    queued            creation until the first attempt's pods (a Kueue job waiting suspended is queued)
    startup           the first attempt with pods: its pods until its first training step
    productive        training, from each attempt's first step to its last, less the two below
    checkpoint_stall  the seconds each attempt's checkpoint saves held training up, as its rank 0 reported
    redone            training after a resume that redid steps an earlier attempt had made: the steps lost times
                      the attempt's own time per step
    shrunk            the missing workers' share of the rest of an attempt's training when it ran with fewer workers
                      than the job asked for (an elastic job shrunk: at 2 of 4 workers, half of it); an estimate
                      that takes progress to scale with the workers (the built-in trainer keeps its global batch)
    recovery          everything between an attempt's last step and the next one's first: noticing the failure,
                      the backoff, new pods or a restart in place, rendezvous, loading the checkpoint
    suspended         from a suspension until the resume

goodput = productive / (wall - suspended). A worked example, a step a second: created at 0 s, pods at 2 s, first
step at 5 s; three attempts fail (at 9, 20 and 29 s, when the job had got to steps 4, 7 and 7) and each restart's
first step comes 4 s after the failure; they resume from steps 0, 2 and 4, so they redo 4, 5 and 3 steps; the
fourth is still training at 40 s. Of 40 s wall: queued 2, startup 3, recovery 12, redone 12 and productive
11 s (4 + 3 + 0 + 4): goodput 11 / 40 = 0.275 (0.28).

The attempts' training is counted from the trainer's firstStepTime: an attempt whose trainer does not say when its
first step finished has no training time (its time goes to startup or recovery)."""

import math
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from trainingjob.model import AttemptOutcome, AttemptRecord, EarlierAttempts, Goodput, History, TrainingJobStatus

PARTS = ("queued", "startup", "productive", "checkpoint_stall", "recovery", "redone", "shrunk", "suspended")
_LOSSY = (AttemptOutcome.FAILED, AttemptOutcome.REPLACED)  # their training ends at their last heartbeat


@dataclass(frozen=True)
class Split:
    """Seconds of a job's wall time by what they went to; they add up to `wall`."""

    queued: float = 0.0
    startup: float = 0.0
    productive: float = 0.0
    checkpoint_stall: float = 0.0
    recovery: float = 0.0
    redone: float = 0.0
    shrunk: float = 0.0
    suspended: float = 0.0

    def add(self, part: str, seconds: float) -> "Split":
        return replace(self, **{part: getattr(self, part) + seconds}) if seconds else self

    def seconds(self) -> dict[str, float]:
        return {part: float(getattr(self, part)) for part in PARTS}

    @property
    def wall(self) -> float:
        return sum(self.seconds().values())

    @property
    def ratio(self) -> float | None:
        """productive / (wall - suspended), to 3 decimals; None before any time counts."""
        active = self.wall - self.suspended
        return round(min(max(self.productive / active, 0.0), 1.0), 3) if active > 0 else None


@dataclass(frozen=True)
class AttemptTimes:
    """An attempt's times as the split counts them: on the job's axis, in order, none before the previous
    attempt's last step."""

    start: datetime
    pods: datetime | None
    first_step: datetime | None
    trained_until: datetime | None  # the end of its training: its last heartbeat if it failed, else its end
    end: datetime  # its end, or the job's while it runs

    @property
    def accounted(self) -> datetime:
        """How far the attempt's own part of the axis reaches: what comes after a failed attempt's last step is the
        next one's recovery."""
        return self.trained_until or self.end


def creation_time(metadata: Any) -> datetime | None:
    """metadata.creationTimestamp (of the model's ObjectMeta, or a manifest's), when it parses."""
    key = "creationTimestamp"
    stamp = metadata.get(key) if isinstance(metadata, dict) else getattr(metadata, "creation_timestamp", None)
    if isinstance(stamp, datetime):
        return stamp
    try:
        return datetime.fromisoformat(stamp) if isinstance(stamp, str) else None
    except ValueError:
        return None


def axis(created: datetime | None, status: TrainingJobStatus, now: datetime) -> tuple[datetime, datetime]:
    """The job's time axis: from its creation (no later than its first attempt: clocks disagree a little) to its
    completion, or `now`."""
    history, earlier = status.history or History(), (status.history or History()).earlier
    if earlier is not None:
        return earlier.start, max(status.completion_time or now, earlier.start, earlier.until)
    start = min([created or status.start_time or now, *(record.start_time for record in history.attempts[:1])])
    return start, max(status.completion_time or now, start)


def _clamp(time: datetime, low: datetime, high: datetime) -> datetime:
    return min(max(time, low), high)


def attempt_times(record: AttemptRecord, after: datetime, end: datetime) -> AttemptTimes:
    """The record's times clamped onto [after, end] in their order (a trainer's clock may be off; the operator's
    may have gone back)."""
    start = _clamp(record.start_time, after, end)
    finish = _clamp(record.end_time or end, start, end)
    pods = _clamp(record.pods_time, start, finish) if record.pods_time is not None else None
    first = _clamp(record.first_step_time, pods or start, finish) if record.first_step_time is not None else None
    until = None
    if first is not None:
        lossy = record.outcome in _LOSSY
        until = _clamp(record.last_heartbeat_time or first, first, finish) if lossy else finish
    return AttemptTimes(start, pods, first, until, finish)


def all_attempt_times(history: History, start: datetime, end: datetime) -> list[AttemptTimes]:
    """Every record's times, each after the one before it (the first after the attempts dropped from the list)."""
    found: list[AttemptTimes] = []
    after = history.earlier.until if history.earlier is not None else start
    for record in history.attempts:
        found.append(attempt_times(record, found[-1].accounted if found else after, end))
    return found


def had_pods(record: AttemptRecord) -> bool:
    """The attempt had pods: its own, or the previous attempt's (in place), or a trainer that trained."""
    return record.pods_time is not None or record.first_step_time is not None or bool(record.in_place)


def _seconds(start: datetime, end: datetime) -> float:
    return max((end - start).total_seconds(), 0.0)


@dataclass(frozen=True)
class _Fold:
    split: Split
    at: datetime  # the axis is accounted for up to here
    had_pods: bool  # an earlier attempt had pods: waiting is recovery, not queueing
    high_water: int  # the furthest step an earlier attempt reached
    suspended_since: datetime | None  # the previous attempt ended suspended then


def _initial(earlier: EarlierAttempts | None, start: datetime) -> _Fold:
    """The fold before the attempts in the list: after those dropped from it, or at the job's start."""
    if earlier is None:
        return _Fold(Split(), start, had_pods=False, high_water=0, suspended_since=None)
    parts = Split(**{part: getattr(earlier, f"{part}_seconds") for part in PARTS})
    return _Fold(parts, earlier.until, earlier.had_pods, earlier.high_water_step, earlier.suspended_since)


def earlier_attempts(history: History, dropped: int, created: datetime | None, now: datetime) -> EarlierAttempts:
    """The history's `earlier` with its first `dropped` attempts folded in (they are leaving the list)."""
    earlier = history.earlier
    start = (
        earlier.start if earlier is not None else min([created or now, *(r.start_time for r in history.attempts[:1])])
    )
    fold = _initial(earlier, start)
    for record in history.attempts[:dropped]:
        fold = _attempt(fold, record, attempt_times(record, fold.at, max(now, fold.at)))
    return EarlierAttempts(
        attempts=(earlier.attempts if earlier is not None else 0) + dropped,
        start=start,
        until=fold.at,
        **{f"{part}_seconds": seconds for part, seconds in fold.split.seconds().items()},
        had_pods=fold.had_pods,
        high_water_step=fold.high_water,
        suspended_since=fold.suspended_since,
    )


def split(status: TrainingJobStatus, created: datetime | None, now: datetime) -> Split:
    """Where the job's time went, from its history: the parts add up to its wall time."""
    history = status.history or History()
    start, end = axis(created, status, now)
    fold = _initial(history.earlier, start)
    for record, times in zip(history.attempts, all_attempt_times(history, start, end), strict=True):
        fold = _attempt(fold, record, times)
    waiting = "recovery" if fold.had_pods else "queued"
    stopped = _clamp(fold.suspended_since or end, fold.at, end)
    return fold.split.add(waiting, _seconds(fold.at, stopped)).add("suspended", _seconds(stopped, end))


def _attempt(fold: _Fold, record: AttemptRecord, times: AttemptTimes) -> _Fold:
    """The axis from the previous attempt's last step to this one's: the previous one's tail and its suspension,
    this one's wait for pods, its start and its training."""
    stop = times.accounted
    suspended = _clamp(fold.suspended_since or fold.at, fold.at, stop)
    resumed = _clamp(times.start, suspended, stop) if fold.suspended_since is not None else suspended
    pods = _clamp(times.pods or times.first_step or stop, resumed, stop)  # in place: no pods of its own
    first = _clamp(times.first_step or stop, pods, stop)
    waiting, starting = ("recovery", "recovery") if fold.had_pods else ("queued", "startup")
    parts = fold.split.add(waiting, _seconds(fold.at, suspended) + _seconds(resumed, pods))
    parts = parts.add("suspended", _seconds(suspended, resumed)).add(starting, _seconds(pods, first))
    for part, seconds in _training(record, _seconds(first, stop), fold.high_water).items():
        parts = parts.add(part, seconds)
    return _Fold(
        parts,
        stop,
        had_pods=fold.had_pods or had_pods(record),
        high_water=max(fold.high_water, record.last_step or 0),
        suspended_since=times.end if record.outcome == AttemptOutcome.SUSPENDED else None,
    )


def _training(record: AttemptRecord, seconds: float, high_water: int) -> dict[str, float]:
    """An attempt's training time: its checkpoint stall, then its work, of which the share spent redoing the steps
    from where it resumed to the furthest an earlier attempt reached is redone (at its own time per step); of the
    rest, the missing workers' share is shrunk (a job at half its workers makes about half the progress a
    second)."""
    stall = min(record.checkpoint_stall_seconds or 0.0, seconds)
    work = seconds - stall
    resumed = record.resumed_from_step or 0
    lost, made = max(high_water - resumed, 0), (record.last_step or 0) - resumed
    share = 0.0 if lost == 0 else 1.0 if made <= lost else lost / made
    fresh, size = work * (1 - share), _size(record)
    return {"checkpoint_stall": stall, "redone": work * share, "shrunk": fresh * (1 - size), "productive": fresh * size}


def _size(record: AttemptRecord) -> float:
    """The share of the job's workers the attempt ran with: 1 unless it recorded fewer."""
    if not record.workers or not record.desired_workers or record.workers >= record.desired_workers:
        return 1.0
    return record.workers / record.desired_workers


def whole_seconds(parts: Split) -> dict[str, int]:
    """The parts in whole seconds that add up to the wall time rounded (half a second up): each rounded down, then
    the seconds left go one each to the parts with the largest fractions, the earlier part on a tie (none is a
    second off or more, none below 0)."""
    exact = parts.seconds()
    whole = {part: int(seconds) for part, seconds in exact.items()}
    left = max(math.floor(parts.wall + 0.5) - sum(whole.values()), 0)
    for part in sorted(PARTS, key=lambda p: (whole[p] - exact[p], PARTS.index(p)))[:left]:
        whole[part] += 1
    return whole


def goodput(status: TrainingJobStatus, created: datetime | None, now: datetime) -> Goodput:
    """status.goodput as of `now`: the split in whole seconds, and the goodput ratio (unknown while the job has
    had time past queueing and no progress report was ever read: its training would not show)."""
    parts = split(status, created, now)
    whole = whole_seconds(parts)
    unknown = status.progress is None and parts.wall - parts.queued - parts.suspended > 0
    seconds = {f"{part}_seconds": value for part, value in whole.items()}
    return Goodput(ratio=None if unknown else parts.ratio, wall_seconds=sum(whole.values()), **seconds, time=now)
