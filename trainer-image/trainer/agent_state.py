"""The coordinator's view of the gang (rank 0's agent holds it): which attempt runs, how far it got, who failed.

Everything here moves forward by attempt and is idempotent within one, which is what makes replayed orders and
reports harmless (trainer.agent_auth): an order for an attempt already reached changes nothing, a report about
another attempt than the current one is ignored, a rank's "started" or "succeeded" counts once, and only the
first failure of an attempt turns the gang "failed".

An order does not switch the gang to the new attempt at once: it is recorded (`ordered`), and the coordinator's
main loop calls `begin` once its own child of the old attempt is dead, so no other pod starts the new attempt while
the old rendezvous store (served by rank 0's old child) still holds the port.
"""

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

STARTING, RUNNING, FAILED, SUCCEEDED = "starting", "running", "failed", "succeeded"
EVENTS = ("started", "failed", "succeeded")
MAX_FAILURES = 8


@dataclass(frozen=True)
class Failure:
    """One rank's failure in the current attempt."""

    rank: int
    exit_code: int
    time: float

    def to_json(self) -> dict[str, Any]:
        """The camelCase form GET /gang serves."""
        return {"rank": self.rank, "exitCode": self.exit_code, "time": round(self.time, 3)}


@dataclass
class _Gang:
    attempt: int
    pods: int
    since: float
    state: str = STARTING
    ordered: int = 0
    running: set[int] = field(default_factory=set)
    succeeded: set[int] = field(default_factory=set)
    failures: list[Failure] = field(default_factory=list)


class GangState:
    """Thread-safe: HTTP handlers write orders and reports, the main loop and long polls read and wait."""

    def __init__(self, attempt: int, pods: int, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._changed = threading.Condition()
        self._gang = _Gang(attempt=attempt, pods=pods, since=clock(), ordered=attempt)
        self._pacing: tuple[int, str] | None = None  # the newest order's TJ_CHECKPOINT_PACING, with its attempt
        self._closed = False

    def snapshot(self) -> dict[str, Any]:
        """GET /gang's body."""
        with self._changed:
            gang = self._gang
            return {
                "attempt": gang.attempt,
                "state": gang.state,
                "since": round(gang.since, 3),
                "pods": gang.pods,
                "running": len(gang.running),
                "failures": [failure.to_json() for failure in gang.failures],
                "ordered": gang.ordered,
            }

    @property
    def attempt(self) -> int:
        """The attempt the gang is on."""
        with self._changed:
            return self._gang.attempt

    @property
    def ordered(self) -> int:
        """The highest attempt ordered (the current one when no newer order waits for `begin`)."""
        with self._changed:
            return self._gang.ordered

    def has_failed(self, attempt: int) -> bool:
        """Whether `attempt` is the current attempt and has failed."""
        with self._changed:
            return self._gang.attempt == attempt and self._gang.state == FAILED

    def is_ready(self) -> bool:
        """GET /ready: not while the current attempt has failed and no newer attempt was ordered."""
        with self._changed:
            gang = self._gang
            return not (gang.state == FAILED and gang.ordered <= gang.attempt)

    def order(self, attempt: int, pacing: str | None = None) -> bool:
        """POST /attempt: record an order for `attempt` (and the TJ_CHECKPOINT_PACING its trainer gets, already
        validated); True if it is newer than every attempt seen so far (an older one changes nothing)."""
        with self._changed:
            if attempt <= self._gang.ordered:
                return False
            self._gang.ordered = attempt
            self._pacing = (attempt, pacing) if pacing is not None else None
            self._changed.notify_all()
            return True

    def pacing_for(self, attempt: int) -> str | None:
        """The TJ_CHECKPOINT_PACING the order for `attempt` carried (None: keep the pod's own)."""
        with self._changed:
            return self._pacing[1] if self._pacing is not None and self._pacing[0] == attempt else None

    def begin(self, attempt: int) -> None:
        """The coordinator switches to `attempt` (its own old child is gone): a fresh, starting gang."""
        with self._changed:
            gang = self._gang
            if attempt <= gang.attempt:
                return
            self._gang = _Gang(attempt=attempt, pods=gang.pods, since=self._clock(), ordered=max(gang.ordered, attempt))
            self._changed.notify_all()

    def report(self, rank: int, attempt: int, event: str, exit_code: int = 0) -> bool:
        """POST /report (and the coordinator's own child): True if it was about the current attempt."""
        with self._changed:
            gang = self._gang
            if attempt != gang.attempt or event not in EVENTS or not 0 <= rank < gang.pods:
                return False
            before = gang.state
            if event == "started":
                gang.running.add(rank)
                if gang.state == STARTING and len(gang.running) >= gang.pods:
                    gang.state = RUNNING
            elif event == "succeeded":
                gang.succeeded.add(rank)
                if gang.state != FAILED and len(gang.succeeded) >= gang.pods:
                    gang.state = SUCCEEDED
            elif gang.state != SUCCEEDED:
                known = any(failure.rank == rank for failure in gang.failures)
                if not known and len(gang.failures) < MAX_FAILURES:
                    gang.failures.append(Failure(rank, exit_code, self._clock()))
                gang.state = FAILED
            if gang.state != before:
                gang.since = self._clock()
                self._changed.notify_all()
            return True

    def wait_next(self, after: int, failure_known: bool, timeout: float) -> dict[str, Any]:
        """GET /next: once the attempt is past `after`, or `after` has failed (unless the caller knows it already),
        or at the timeout; answers {"attempt", "state"}."""

        def news() -> bool:
            gang = self._gang
            failed = gang.attempt == after and gang.state == FAILED and not failure_known
            return self._closed or gang.attempt > after or failed

        with self._changed:
            self._changed.wait_for(news, timeout)
            return {"attempt": self._gang.attempt, "state": self._gang.state}

    def wait_begun(self, attempt: int, timeout: float) -> bool:
        """Wait until the gang is on `attempt` or later (an order's answer); False at the timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: self._closed or self._gang.attempt >= attempt, timeout)

    def close(self) -> None:
        """Answer every waiting request now (the agent is leaving)."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
