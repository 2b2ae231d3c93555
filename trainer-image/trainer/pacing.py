"""When DDP ranks agree (on stopping and on time-based checkpoints), and how fast the steps go."""

import statistics
import time

CONTROL_EVERY = 10  # the most steps between two agreements: fast steps pay for one tiny all-reduce per ten
CONTROL_SECONDS = 1.0  # about the most wall time between two: slow steps agree more often, down to every step
WARMUP_STEPS = 5


class AgreementSchedule:
    """When the ranks agree next: at most CONTROL_EVERY steps and about CONTROL_SECONDS after the last agreement.

    A SIGTERM is thus acted on within about a second (or one step, if slower), however slow the steps are.
    """

    def __init__(self, step: int) -> None:
        self.next_step = step + 1
        self._since_step, self._since = step, time.monotonic()

    def is_due(self, step: int) -> bool:
        return step >= self.next_step

    def seconds_per_step(self, step: int) -> float:
        """This rank's mean step time since the last agreement."""
        return (time.monotonic() - self._since) / max(1, step - self._since_step)

    def reschedule(self, step: int, slowest_seconds_per_step: float) -> None:
        """Every rank passes the same all-reduced step time, so every rank picks the same next step."""
        steps = int(CONTROL_SECONDS / max(slowest_seconds_per_step, 1e-6))
        self.next_step = step + min(CONTROL_EVERY, max(1, steps))
        self._since_step, self._since = step, time.monotonic()


class StepTimer:
    """Steps per second after a warm-up (mean and median), measured like the benchmark's bare script."""

    def __init__(self, from_step: int) -> None:
        self.from_step = from_step
        self.start: float | None = None
        self.last_step = from_step
        self.end = 0.0
        self.durations: list[float] = []

    def at(self, step: int) -> None:
        now = time.perf_counter()
        if step == self.from_step:
            self.start = now
        elif self.start is not None:
            self.durations.append(now - self.end)
        self.last_step, self.end = step, now

    def rate(self) -> float | None:
        if self.start is None or self.last_step <= self.from_step:
            return None
        return (self.last_step - self.from_step) / (self.end - self.start)

    def median_rate(self) -> float | None:
        return 1.0 / statistics.median(self.durations) if self.durations else None
