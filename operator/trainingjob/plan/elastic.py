"""How many workers an elastic job's next attempt runs with (workers.minReplicas below replicas).

A gang whose worker pods cannot all be placed (the scheduler calls some unschedulable: a node gone, no spare GPU)
waits resizeWaitSeconds for them; past it the next attempt starts, from the newest checkpoint, with the workers that
were placed, if there are at least minReplicas of them (else the whole gang waits for room, as a job that is not
elastic does). A job running with fewer workers than replicas grows back, at its next checkpoint, once more would
fit, and at most once per resizeIntervalSeconds after its last resize, so that capacity that comes and goes does
not restart it each time. A shrink is never held back by the interval: a job whose gang cannot be placed does not
train at all.

The decision is pure: what the cluster showed (Capacity, read from the attempt's pods by capacity_of) and the
job's sizes in, a WorldSize out; plan/resize.py turns a Shrink into a gang restart at the smaller size and a Grow
into one at the next checkpoint, and records the outcome in status.scale (scale_status). `spare` (room for more
workers) is looked for on the nodes while a job runs shrunk (kube/room.py).
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from trainingjob.children.contract import ROLE_WORKER
from trainingjob.children.observe import PodState
from trainingjob.model import WorkerScale


class Resize(StrEnum):
    STAY = "Stay"
    SHRINK = "Shrink"  # restart now with fewer workers
    GROW = "Grow"  # restart with more workers at the next checkpoint


class ScaleReason(StrEnum):
    ALL_WORKERS = "AllWorkers"
    NOT_ELASTIC = "NotElastic"
    WAITING = "WaitingForCapacity"
    BELOW_MIN = "BelowMinReplicas"
    CAPACITY_LOST = "CapacityLost"
    RATE_LIMITED = "ResizeRateLimited"
    CAPACITY_RETURNED = "CapacityReturned"


@dataclass(frozen=True)
class Capacity:
    """What the cluster showed of room for the job's workers, observed once per reconcile."""

    placed: int  # worker pods of the current attempt bound to a node
    unschedulable: int  # worker pods of the current attempt the scheduler could not place
    unschedulable_since: datetime | None = None  # since when the earliest of those has been unschedulable
    spare: int = 0  # further worker pods that would fit now (beyond the current attempt's)


def capacity_of(pods: Iterable[PodState], spare: int = 0) -> Capacity:
    """What the current attempt's worker pods (`pods`) show of room: those bound to a node, those the scheduler
    calls unschedulable and since when (the earliest; its creation when the scheduler did not say). Pods going or
    gone count as neither. `spare`: further workers known to fit (the caller's probe; none by default)."""
    workers = [p for p in pods if p.replica.role == ROLE_WORKER and not p.deleting and not p.is_finished]
    unplaced = [p for p in workers if not p.node and p.unschedulable]
    moments = [moment for p in unplaced if (moment := p.unschedulable_since or p.created) is not None]
    return Capacity(
        placed=sum(1 for p in workers if p.node),
        unschedulable=len(unplaced),
        unschedulable_since=min(moments, default=None),
        spare=spare,
    )


@dataclass(frozen=True)
class Sizes:
    """The job's worker counts: spec.workers.replicas, minReplicas (replicas when unset), the current attempt's."""

    desired: int
    fewest: int
    current: int


@dataclass(frozen=True)
class WorldSize:
    """The next attempt's worker count and why; `recheck_at`: when the decision changes with nothing new seen (the
    wait or the interval ends), for the reconcile to come back then."""

    action: Resize
    workers: int
    reason: ScaleReason
    message: str
    recheck_at: datetime | None = None


def next_world_size(
    sizes: Sizes, capacity: Capacity, *, last_resize: datetime | None, now: datetime, wait: float, interval: float
) -> WorldSize:
    """Shrink to the placed workers after `wait` seconds of unschedulable ones, grow back when more fit (at most
    once per `interval` seconds after the last resize), or stay."""
    current, of = sizes.current, f"{sizes.current} of {sizes.desired} workers"
    if sizes.fewest >= sizes.desired:
        return WorldSize(Resize.STAY, current, ScaleReason.NOT_ELASTIC, f"{of}: minReplicas is replicas")
    if capacity.unschedulable > 0 and capacity.placed < current:
        return _short_of_room(sizes, capacity, now, wait)
    if current >= sizes.desired:
        return WorldSize(Resize.STAY, current, ScaleReason.ALL_WORKERS, f"{of}")
    if capacity.spare <= 0:
        return WorldSize(Resize.STAY, current, ScaleReason.CAPACITY_LOST, f"{of}: no room for more")
    target = min(sizes.desired, current + capacity.spare)
    allowed = last_resize + timedelta(seconds=interval) if last_resize is not None else now
    if now < allowed:
        message = f"{of}: room for {target}, but the last resize was less than {interval:g}s ago"
        return WorldSize(Resize.STAY, current, ScaleReason.RATE_LIMITED, message, recheck_at=allowed)
    message = f"{of}: room for {target} again; growing at the next checkpoint"
    return WorldSize(Resize.GROW, target, ScaleReason.CAPACITY_RETURNED, message)


def _short_of_room(sizes: Sizes, capacity: Capacity, now: datetime, wait: float) -> WorldSize:
    """Some of the current attempt's workers cannot be placed: wait for them, then shrink to those that were."""
    current, placed = sizes.current, capacity.placed
    since = capacity.unschedulable_since or now
    waited_until = since + timedelta(seconds=wait)
    unplaced = f"{capacity.unschedulable} of {current} workers unschedulable since {since.isoformat()}"
    if now < waited_until:
        message = f"{unplaced}: waiting up to {wait:g}s for room before going on with fewer"
        return WorldSize(Resize.STAY, current, ScaleReason.WAITING, message, recheck_at=waited_until)
    if placed < sizes.fewest:
        message = f"{unplaced}: only {placed} placed, fewer than minReplicas {sizes.fewest}; waiting for room"
        return WorldSize(Resize.STAY, current, ScaleReason.BELOW_MIN, message)
    message = f"{unplaced}: going on with the {placed} placed, from the newest checkpoint"
    return WorldSize(Resize.SHRINK, placed, ScaleReason.CAPACITY_LOST, message)


def scale_status(previous: WorkerScale | None, sizes: Sizes, decision: WorldSize, now: datetime) -> WorkerScale:
    """status.scale after `decision`, for a job now running `sizes.current` workers: `since` moves when that count
    changes, and a change after the first is a resize."""
    changed = previous is not None and previous.current != sizes.current
    return WorkerScale(
        current=sizes.current,
        desired=sizes.desired,
        workers=f"{sizes.current}/{sizes.desired}",
        reason=decision.reason.value,
        message=decision.message,
        since=now if previous is None or changed else previous.since,
        last_resize_time=now if changed else (previous.last_resize_time if previous else None),
    )
