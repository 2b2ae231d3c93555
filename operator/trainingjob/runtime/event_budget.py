"""Routine Events paced across the whole operator, so that a burst of jobs is not a burst of Event writes.

A job's way up says two Normal Events (JobCreated, then its transition to Running): 500 writes for 250 jobs
created at once, each kept by etcd for an hour, while each job's status already says the same, with times (its
conditions and status.history). These two are drawn from one token bucket: ROUTINE_BURST at once, then
ROUTINE_PER_SECOND. A cluster that creates a few jobs at a time sees every one of them; a burst writes the first
ROUTINE_BURST and then one a second, and the rest are counted (trainingjob_events_skipped_total, by reason), not
written. Every other Event is always written: a failure, a refusal, a restart, a stuck pod, a job's end are what a
user reads Events for.

Kubernetes' own event recorder drops Events too, with a bucket per object (25 at once, then one every 5 minutes):
that quiets one object's noise, not a burst of many objects' (the apiserver's EventRateLimit admission does that,
where an administrator turns it on)."""

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from trainingjob.plan import Event
from trainingjob.plan.creation import JOB_CREATED
from trainingjob.plan.phase import ALL_RUNNING

ROUTINE = frozenset({JOB_CREATED, ALL_RUNNING})  # Normal Events, the way up
ROUTINE_BURST = 100
ROUTINE_PER_SECOND = 1.0


@dataclass(frozen=True)
class Bucket:
    """Tokens left at time `at` (seconds on a monotonic clock), at most `burst`, `rate` more each second."""

    tokens: float
    at: float
    burst: float = ROUTINE_BURST
    rate: float = ROUTINE_PER_SECOND

    def take(self, now: float) -> tuple["Bucket", bool]:
        """The bucket after one token is asked for at `now`, and whether it had one. A clock that went back
        refills nothing."""
        tokens = min(self.burst, self.tokens + max(now - self.at, 0.0) * self.rate)
        granted = tokens >= 1
        return replace(self, tokens=tokens - granted, at=max(now, self.at)), granted


class EventBudget:
    """The operator's one bucket of routine Events; safe to share between reconcile workers."""

    def __init__(
        self,
        burst: float = ROUTINE_BURST,
        per_second: float = ROUTINE_PER_SECOND,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clock, self._lock = clock, threading.Lock()
        self._bucket = Bucket(burst, clock(), burst, per_second)

    def admit(self, events: Sequence[Event]) -> tuple[list[Event], list[Event]]:
        """The events to write (each routine one the bucket has a token for, and every other) and those skipped."""
        kept: list[Event] = []
        skipped: list[Event] = []
        with self._lock:
            for event in events:
                granted = True
                if event.type == "Normal" and event.reason in ROUTINE:
                    self._bucket, granted = self._bucket.take(self._clock())
                (kept if granted else skipped).append(event)
        return kept, skipped
