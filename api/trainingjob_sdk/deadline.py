"""How long a watch may go on, and how it goes on past a quiet spell or a dropped connection: a deadline, and
pauses that grow while trying again gets nowhere, so that a failing server is not asked again at once, forever."""

import time
from collections.abc import Callable, Iterator
from typing import Any

from trainingjob_sdk.errors import Unavailable

FIRST_PAUSE = 0.5
LONGEST_PAUSE = 8.0
LONGEST_OUTAGE = 60.0  # errors for this long with nothing answered between: the last is raised, not retried
SETTLED = 1.0  # a stream open this long was a working one: the next is opened at once


class Deadline:
    """`seconds` from now, or never (None)."""

    def __init__(self, seconds: float | None) -> None:
        self.at = None if seconds is None else time.monotonic() + seconds

    def left(self, most: float) -> float:
        """The seconds left, at most `most` (`most` without a deadline); 0 once it has passed."""
        return most if self.at is None else max(0.0, min(most, self.at - time.monotonic()))

    def passed(self) -> bool:
        return self.at is not None and time.monotonic() >= self.at


class Retry:
    """When to open a watch again: at once after a stream that stayed open SETTLED seconds, otherwise after pauses
    doubling from FIRST_PAUSE to LONGEST_PAUSE, whatever such short streams sent (a server that ends every stream
    at once is not asked again at once, forever). An outage, errors only with nothing answered for LONGEST_OUTAGE
    seconds, raises its last error."""

    def __init__(self, deadline: Deadline) -> None:
        self.deadline = deadline
        self.pause = 0.0
        self.heard = self.opened = time.monotonic()

    def answered(self) -> None:
        """The server answered (a request succeeded, a job or a keepalive came): any outage is over."""
        self.heard = time.monotonic()

    def again(self, error: Exception | None = None) -> bool:
        """Pause before the next attempt; False when the deadline passes first. `error`: why the last attempt
        failed (None: it ended without one), raised once nothing was answered for LONGEST_OUTAGE seconds."""
        now = time.monotonic()
        if error is not None and now - self.heard >= LONGEST_OUTAGE:
            raise error
        if now - self.opened >= SETTLED:
            self.pause = 0.0
        time.sleep(self.deadline.left(self.pause))
        self.pause = min(LONGEST_PAUSE, max(FIRST_PAUSE, self.pause * 2))
        self.opened = time.monotonic()
        return not self.deadline.passed()


def followed(
    seconds: float | None, first: Callable[[], Any], streams: Callable[[Deadline, Retry], Iterator[Any]]
) -> Iterator[Any]:
    """What `first()` reads now, then what each stream of `streams(deadline, retry)` yields, opened again after it
    ends (see Retry) until `seconds` have passed (forever when None). Unavailable from a stream is a failed attempt;
    other errors end the watch."""
    deadline = Deadline(seconds)
    retry = Retry(deadline)
    yield first()
    retry.answered()
    while not deadline.passed():
        failed: Unavailable | None = None
        try:
            yield from streams(deadline, retry)
        except Unavailable as error:  # no answer, a dropped connection, a failing server: after a pause, again
            failed = error
        if deadline.passed() or not retry.again(failed):
            return
