"""A job's progress as it runs (`tjctl run`, `tjctl watch`): a bar with the percent done, the steps, the operator's
estimate of the time left, the loss, the throughput and the newest checkpoint, fitted to the terminal's width (the
last two give way first); a line per phase it enters; a summary line at the end."""

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from types import TracebackType

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.progress import Progress, ProgressColumn, Task
from rich.progress_bar import ProgressBar
from rich.segment import Segment
from rich.text import Text

from tjctl import display
from trainingjob.model import Progress as JobSteps
from trainingjob.model import TrainingJobStatus


def status_line(status: TrainingJobStatus, total_steps: int | None, started: float) -> Text:
    """'attempt 2 | Succeeded | step 300/300 (100%) | loss 0.11 | 1,234 samples/s | checkpoint step-300 | 52 s'."""
    progress = status.progress or JobSteps()
    total = progress.total_steps or total_steps
    parts = [f"attempt {status.attempt}", status.phase.value]
    parts.append(f"step {progress.step}/{total}" if total else f"step {progress.step}")
    if progress.percent is not None:
        parts[-1] += f" ({progress.percent}%)"
    if progress.loss is not None:
        parts.append(f"loss {display.significant(progress.loss)}")
    if progress.samples_per_second:
        parts.append(f"{progress.samples_per_second:,.0f} samples/s")
    left = display.time_left(progress.estimated_completion_time, datetime.now(UTC))
    if left:
        parts.append(f"ETA {left}")
    if status.last_checkpoint:
        parts.append(f"checkpoint step-{status.last_checkpoint.step}")
    parts.append(f"{time.monotonic() - started:.0f} s")
    return Text(" | ".join(parts), style="bold")


def _percent(steps: JobSteps, total: int | None) -> str:
    if steps.percent is not None:
        return f"{steps.percent}%"
    return f"{min(100, steps.step * 100 // total)}%" if total else ""


def _extras(status: TrainingJobStatus, steps: JobSteps) -> tuple[str, ...]:
    """The throughput and the newest checkpoint, as far as known."""
    throughput = f"{steps.samples_per_second:,.0f} samples/s" if steps.samples_per_second else ""
    checkpoint = f"checkpoint step-{status.last_checkpoint.step}" if status.last_checkpoint else ""
    return tuple(part for part in (throughput, checkpoint) if part)


MIN_BAR, MAX_BAR = 10, 40  # the bar's width: left out when less fits; at most rich's default


@dataclass(frozen=True)
class Line:
    """The parts of the bar's line. The steps, percent, ETA and loss always show; when the width is short the
    checkpoint goes first, then the throughput, then the attempt number, then the bar."""

    attempt: int
    phase: str
    percent: str = ""
    steps: str = ""
    eta: str = ""
    loss: str = ""
    extras: tuple[str, ...] = ()  # the throughput, then the checkpoint

    def right(self, extras: tuple[str, ...]) -> str:
        """What follows the bar: ' 30% step 300/1000 ETA 4m29s loss 0.25 | 1,234 samples/s'."""
        details = " | ".join(part for part in (self.loss, *extras) if part)
        return " ".join(
            part for part in (f"{self.percent:>4}" if self.percent else "", self.steps, self.eta, details) if part
        )

    def layout(self, width: int) -> tuple[str, int, str]:
        """(before the bar, the bar's width, after it) in `width` columns; a width of 0 is no bar."""
        title = f"attempt {self.attempt} {self.phase}"
        tries = [(title, self.extras[:kept]) for kept in range(len(self.extras), -1, -1)] + [(self.phase, ())]
        for before, extras in tries:
            after = self.right(extras)
            room = width - len(before) - len(after) - 2  # a space each side of the bar
            if room >= MIN_BAR:
                return before, min(room, MAX_BAR), after
        after = self.right(()).strip()
        return "", 0, (f"{self.phase} {after}" if len(self.phase) + 1 + len(after) <= width else after)


class LineColumn(ProgressColumn):
    """The whole line of the job's task (its `line` field), laid out for the width the terminal gives it."""

    def render(self, task: Task) -> "_Fitted":
        line = task.fields["line"]
        left = str(task.fields.get("eta") or "")
        if not left and task.total and task.time_remaining is not None:  # until the operator estimates: the bar's
            left = display.duration(task.time_remaining)
        return _Fitted(replace(line, eta=f"ETA {left}" if left else ""), task)


class _Fitted:
    def __init__(self, line: Line, task: Task) -> None:
        self.line, self.task = line, task

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(options.max_width, options.max_width)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        before, bar, after = self.line.layout(options.max_width)
        task = self.task
        if before:
            yield Segment(before + " ")
        if bar:
            total = max(0, task.total) if task.total is not None else None
            completed, started, clock = max(0, task.completed), task.started, task.get_time()
            yield ProgressBar(total, completed, width=bar, pulse=not started, animation_time=clock)
        yield Text(" " + after if bar else after, justify="default", no_wrap=True, overflow="ellipsis")


class JobProgress:
    """A live bar on `console` while the job runs (in a `with` block); `update` it with each new status."""

    def __init__(
        self, console: Console, total_steps: int | None = None, *, announce: bool = True,
        clock: Callable[[], float] | None = None,
    ) -> None:  # fmt: skip
        self.console, self.total_steps, self.announce = console, total_steps, announce
        self.progress = Progress(
            LineColumn(), console=console, transient=True, refresh_per_second=4, get_time=clock
        )  # fmt: skip
        self.task = self.progress.add_task("", total=total_steps, line=Line(0, "starting"), eta="")
        self.phase: tuple[int, str] | None = None

    def __enter__(self) -> "JobProgress":
        self.progress.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.progress.stop()

    def update(self, status: TrainingJobStatus) -> None:
        steps = status.progress or JobSteps()
        total = steps.total_steps or self.total_steps
        left = display.time_left(steps.estimated_completion_time, datetime.now(UTC))
        if self.phase is not None and self.phase[0] != status.attempt:
            self.progress.reset(self.task)  # a new attempt: its own rate, from the step it resumed at
        line = Line(
            status.attempt, status.phase.value, _percent(steps, total),
            f"step {steps.step}/{total}" if total else f"step {steps.step}",
            loss=f"loss {display.significant(steps.loss)}" if steps.loss is not None else "",
            extras=_extras(status, steps),
        )  # fmt: skip
        completed = min(steps.step, total) if total else steps.step
        self.progress.update(self.task, total=total, completed=completed, line=line, eta=left)
        phase = (status.attempt, status.phase.value)
        if self.announce and phase != self.phase:
            self.console.print(f"attempt {status.attempt}: {status.phase.value}", highlight=False)
        self.phase = phase
