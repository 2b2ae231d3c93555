"""The progress bar of `tjctl run` and `tjctl watch`: the percent done, the steps, the operator's estimate of the
time left, the loss and throughput; a line each time the job enters a phase (or an attempt), not on every step."""

import io
from datetime import UTC, datetime, timedelta

import pytest
from rich.console import Console

from tjctl.progress_bar import JobProgress, status_line
from trainingjob.model import TrainingJobStatus

pytestmark = pytest.mark.fast


def _status(phase: str, step: int, attempt: int = 1, **progress: object) -> TrainingJobStatus:
    return TrainingJobStatus.model_validate(
        {"phase": phase, "attempt": attempt, "progress": {"step": step, **progress}}
    )


def _bar(bar: JobProgress, width: int = 200) -> str:
    shown = Console(file=io.StringIO(), width=width)
    shown.print(bar.progress.get_renderable())
    return str(shown.file.getvalue())  # type: ignore[attr-defined]


def test_the_bar_shows_the_percent_steps_time_left_loss_and_throughput() -> None:
    soon = (datetime.now(UTC) + timedelta(minutes=4, seconds=30)).isoformat()
    bar = JobProgress(Console(file=io.StringIO()), total_steps=1000)
    bar.update(_status("Running", 300, percent=30, loss=0.25, samplesPerSecond=1234.5, estimatedCompletionTime=soon))
    shown = _bar(bar)
    for part in ("attempt 1 Running", " 30%", "step 300/1000", "ETA 4m", "loss 0.25", "1,234 samples/s"):
        assert part in shown, shown
    assert bar.progress.tasks[0].completed == 300 and bar.progress.tasks[0].total == 1000


ESSENTIAL = (" 30%", "step 300/1000", "ETA 4m", "loss 3.2e-05")  # shown at any width
THROUGHPUT, CHECKPOINT, ATTEMPT = "1,234 samples/s", "checkpoint step-200", "attempt 1 Running"


@pytest.mark.parametrize(
    ("width", "shown", "left_out"),
    [
        pytest.param(120, (ATTEMPT, "━", THROUGHPUT, CHECKPOINT), (), id="120"),
        pytest.param(80, (ATTEMPT, "━"), (THROUGHPUT, CHECKPOINT), id="80"),
        pytest.param(60, ("Running ━", "━"), ("attempt", THROUGHPUT, CHECKPOINT), id="60"),
        pytest.param(50, ("Running 30%",), ("━", "attempt", THROUGHPUT, CHECKPOINT), id="50"),
    ],
)
def test_the_line_fits_the_terminal_and_keeps_the_steps_percent_eta_and_loss(
    width: int, shown: tuple[str, ...], left_out: tuple[str, ...]
) -> None:
    soon = (datetime.now(UTC) + timedelta(minutes=4, seconds=30)).isoformat()
    progress = {"step": 300, "percent": 30, "loss": 3.2e-5, "samplesPerSecond": 1234.5, "estimatedCompletionTime": soon}
    checkpoint = {"step": 200, "path": "/c/step-200", "time": soon}
    status = {"phase": "Running", "attempt": 1, "progress": progress, "lastCheckpoint": checkpoint}
    bar = JobProgress(Console(file=io.StringIO()), total_steps=1000)
    bar.update(TrainingJobStatus.model_validate(status))
    line = _bar(bar, width).rstrip("\n")
    assert len(line) <= width and "…" not in line, line
    for part in (*ESSENTIAL, *shown):
        assert part in line, line
    for part in left_out:
        assert part not in line, line


@pytest.mark.parametrize(
    ("loss", "shown"),
    [
        pytest.param(3.2e-5, "3.2e-05", id="tiny"),
        pytest.param(0.0123, "0.0123", id="small"),
        pytest.param(1.23456, "1.23", id="one"),
        pytest.param(0.25, "0.25", id="exact"),
        pytest.param(412.7, "413", id="large"),
        pytest.param(0.0, "0", id="zero"),
    ],
)
def test_the_loss_keeps_three_significant_digits(loss: float, shown: str) -> None:
    bar = JobProgress(Console(file=io.StringIO()), total_steps=100)
    bar.update(_status("Running", 10, loss=loss))
    assert f"loss {shown} " in _bar(bar) + " "
    assert f"loss {shown} |" in status_line(_status("Running", 10, loss=loss), 100, started=0).plain


def test_without_a_percent_from_the_operator_the_bar_counts_its_own() -> None:
    bar = JobProgress(Console(file=io.StringIO()), total_steps=None)
    bar.update(_status("Running", 50, totalSteps=200))
    assert " 25%" in _bar(bar) and "step 50/200" in _bar(bar)
    bar.update(_status("Running", 7, totalSteps=None))
    assert "step 7 " in _bar(bar) + " " and "%" not in _bar(bar)  # no total: no percent, an open bar


def test_until_the_operator_estimates_the_time_left_the_bar_does_from_the_attempts_rate() -> None:
    now = [0.0]
    bar = JobProgress(Console(file=io.StringIO()), total_steps=1000, clock=lambda: now[0])
    bar.update(_status("Running", 100))
    now[0] = 10.0
    bar.update(_status("Running", 200))  # 10 steps a second: 800 steps left
    assert "ETA 1m20s" in _bar(bar)
    later = (datetime.now(UTC) + timedelta(minutes=5, seconds=30)).isoformat()
    bar.update(_status("Running", 210, estimatedCompletionTime=later))
    assert "ETA 5m" in _bar(bar) and "1m20s" not in _bar(bar)  # the operator's, once it has one
    now[0] = 11.0
    bar.update(_status("Running", 150, attempt=2))  # resumed from a checkpoint: no rate yet, not a negative one
    assert "ETA" not in _bar(bar)


def test_a_line_per_phase_and_attempt_not_per_step() -> None:
    console = Console(file=io.StringIO(), width=200)
    bar = JobProgress(console, total_steps=100)
    for status in (
        _status("Pending", 0), _status("Running", 10), _status("Running", 20), _status("Restarting", 20),
        _status("Running", 20, attempt=2), _status("Succeeded", 100, attempt=2),
    ):  # fmt: skip
        bar.update(status)
    lines = str(console.file.getvalue()).splitlines()  # type: ignore[attr-defined]
    assert lines == [
        "attempt 1: Pending", "attempt 1: Running", "attempt 1: Restarting", "attempt 2: Running",
        "attempt 2: Succeeded",
    ]  # fmt: skip
    quiet = Console(file=io.StringIO())
    JobProgress(quiet, announce=False).update(_status("Running", 1))
    assert quiet.file.getvalue() == ""  # type: ignore[attr-defined]


def test_the_summary_line() -> None:
    line = status_line(_status("Succeeded", 300, attempt=2, percent=100, loss=0.11), 300, started=0).plain
    assert line.startswith("attempt 2 | Succeeded | step 300/300 (100%) | loss 0.11 | ")
