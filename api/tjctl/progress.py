"""A job's progress as it runs (`tjctl run`, `tjctl watch`): a bar with the percent done, the steps, the loss, the
throughput and the operator's estimate of the time left; a line per phase it enters; a summary line at the end."""

import time
from collections.abc import Callable
from datetime import UTC, datetime
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, Progress, ProgressColumn, Task, TextColumn
from rich.text import Text

from tjctl import display
from trainingjob.model import Progress as JobSteps
from trainingjob.model import TrainingJobStatus


def status_line(status: TrainingJobStatus, total_steps: int | None, started: float) -> Text:
    """'attempt 2 | Succeeded | step 300/300 (100%) | loss 0.1100 | 1,234 samples/s | checkpoint step-300 | 52 s'."""
    progress = status.progress or JobSteps()
    total = progress.total_steps or total_steps
    parts = [f"attempt {status.attempt}", status.phase.value]
    parts.append(f"step {progress.step}/{total}" if total else f"step {progress.step}")
    if progress.percent is not None:
        parts[-1] += f" ({progress.percent}%)"
    if progress.loss is not None:
        parts.append(f"loss {progress.loss:.4f}")
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


def _details(status: TrainingJobStatus, steps: JobSteps) -> str:
    parts = []
    if steps.loss is not None:
        parts.append(f"loss {steps.loss:.4f}")
    if steps.samples_per_second:
        parts.append(f"{steps.samples_per_second:,.0f} samples/s")
    if status.last_checkpoint:
        parts.append(f"checkpoint step-{status.last_checkpoint.step}")
    return " | ".join(parts)


class EtaColumn(ProgressColumn):
    """The operator's estimate of the time left (it knows the whole run's rate); until it has one, the bar's own,
    from the steps of the current attempt."""

    def render(self, task: Task) -> Text:
        left = str(task.fields.get("eta") or "")
        if not left and task.total and task.time_remaining is not None:
            left = display.duration(task.time_remaining)
        return Text(f"ETA {left}" if left else "")


class JobProgress:
    """A live bar on `console` while the job runs (in a `with` block); `update` it with each new status."""

    def __init__(
        self, console: Console, total_steps: int | None = None, *, announce: bool = True,
        clock: Callable[[], float] | None = None,
    ) -> None:  # fmt: skip
        self.console, self.total_steps, self.announce = console, total_steps, announce
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[percent]:>4}"),
            TextColumn("{task.fields[steps]}"),
            EtaColumn(),
            TextColumn("{task.fields[details]}"),
            console=console,
            transient=True,
            refresh_per_second=4,
            get_time=clock,
        )
        self.task = self.progress.add_task("starting", total=total_steps, percent="", steps="", eta="", details="")
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
        self.progress.update(
            self.task,
            description=f"attempt {status.attempt} {status.phase.value}",
            total=total,
            completed=min(steps.step, total) if total else steps.step,
            percent=_percent(steps, total),
            steps=f"step {steps.step}/{total}" if total else f"step {steps.step}",
            eta=left,
            details=_details(status, steps),
        )
        phase = (status.attempt, status.phase.value)
        if self.announce and phase != self.phase:
            self.console.print(f"attempt {status.attempt}: {status.phase.value}", highlight=False)
        self.phase = phase
