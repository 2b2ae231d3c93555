"""Each cause said once a minute at most: an Event about a job that repeats one this operator wrote less than a minute
ago for the same cause (the job's UID, restart counts and generation, and the Event's type, reason and message) is
not written again. A cause that comes back after another (a quota on Secrets, then on NetworkPolicies, then on
Secrets again; pods refused, created, refused again) would otherwise be announced at every turn, however often the
turns come. The memory is this process's, as Kubernetes' own event recorder keeps it: an operator that starts again
may say a cause once more."""

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from trainingjob.plan import Event

REPEAT_INTERVAL = timedelta(minutes=1)
MOST_CAUSES = 4096  # causes remembered at once (a minute of them): the oldest is forgotten first

Cause = tuple[str, str, str, str, str, str]


def _now() -> datetime:
    return datetime.now(UTC)


def cause(job: dict[str, Any], event: Event) -> Cause:
    """What makes two Events about a job the same announcement (`job` as the pass that says it wrote it)."""
    metadata, status = job.get("metadata") or {}, job.get("status") or {}
    restarts = status.get("restarts") if isinstance(status, dict) else None
    counted = ",".join(f"{k}={v}" for k, v in sorted(restarts.items())) if isinstance(restarts, dict) else ""
    return (
        str(metadata.get("uid", "")),
        counted,
        str(metadata.get("generation", "")),
        event.type,
        event.reason,
        event.message,
    )


class Announced:
    """The causes this operator announced in the last minute, and when."""

    def __init__(self, clock: Callable[[], datetime] = _now) -> None:
        self.clock = clock
        self.said: dict[Cause, datetime] = {}

    def fresh(self, job: dict[str, Any], events: Sequence[Event]) -> list[Event]:
        """The events to write: those whose cause was not announced in the last minute (remembered as said now)."""
        now = self.clock()
        kept = []
        for event in events:
            key = cause(job, event)
            last = self.said.get(key)
            if last is not None and timedelta(0) <= now - last < REPEAT_INTERVAL:
                continue
            self.said.pop(key, None)  # re-inserted last: the oldest cause stays first
            self.said[key] = now
            kept.append(event)
        self._forget(now)
        return kept

    def _forget(self, now: datetime) -> None:
        """Drop the causes said a minute ago or more (or, past MOST_CAUSES, the oldest)."""
        while self.said:
            oldest, when = next(iter(self.said.items()))
            if len(self.said) <= MOST_CAUSES and timedelta(0) <= now - when < REPEAT_INTERVAL:
                return
            del self.said[oldest]
