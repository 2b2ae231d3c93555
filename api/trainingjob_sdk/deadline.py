"""How long a watch may go on, and how it goes on past a quiet spell or a dropped connection: a deadline, and
pauses that grow while trying again gets nowhere, so that a failing server is not asked again at once, forever."""

import time

FIRST_PAUSE = 0.5
LONGEST_PAUSE = 8.0
LONGEST_OUTAGE = 60.0  # errors for this long with nothing received between: the last is raised, not retried


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
    """When to open a watch again: at once after it made progress, then after pauses doubling from FIRST_PAUSE to
    LONGEST_PAUSE while it makes none; an outage (errors only) longer than LONGEST_OUTAGE raises its last error."""

    def __init__(self, deadline: Deadline) -> None:
        self.deadline = deadline
        self.pause = 0.0
        self.outage_since: float | None = None

    def progressed(self) -> None:
        """Something new came: the next retry goes at once, and any outage is over."""
        self.pause, self.outage_since = 0.0, None

    def again(self, error: Exception | None = None) -> bool:
        """Pause before the next attempt; False when the deadline passes first. `error`: why the last attempt
        failed (None: it ended without one), raised once the outage it belongs to has lasted LONGEST_OUTAGE."""
        now = time.monotonic()
        if error is not None:
            self.outage_since = now if self.outage_since is None else self.outage_since
            if now - self.outage_since >= LONGEST_OUTAGE:
                raise error
        time.sleep(self.deadline.left(self.pause))
        self.pause = min(LONGEST_PAUSE, max(FIRST_PAUSE, self.pause * 2))
        return not self.deadline.passed()
