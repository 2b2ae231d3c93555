"""`tjctl run`: a job on this machine with a live status line, then its outcome."""

import logging
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.text import Text

from tjctl import display
from trainingjob.local import Chaos, run_local
from trainingjob.local_files import ConfigMaps
from trainingjob.model import Progress, TrainingJobStatus
from trainingjob.plan import Event


def status_line(status: TrainingJobStatus, total_steps: int | None, started: float) -> Text:
    progress = status.progress or Progress()
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


def run(
    manifest: dict[str, Any],
    total_steps: int | None,
    workdir: Path,
    chaos: Chaos | None,
    console: Console,
    *,
    configmaps: ConfigMaps | None = None,
) -> int:
    """Run to the end; 0 when the job succeeded. `configmaps` stand in for the cluster's (name -> data)."""
    # The operator's decision log says what the events printed below say: keep it off the console.
    logging.getLogger("trainingjob").addHandler(logging.NullHandler())
    started = time.monotonic()
    with Live(Text("starting"), console=console, refresh_per_second=4, transient=True) as live:

        def on_status(status: TrainingJobStatus) -> None:
            live.update(status_line(status, total_steps, started))

        def on_event(event: Event) -> None:
            style = "yellow" if event.type == "Warning" else "green"
            console.print(f"[{style}]{event.reason}[/]: {event.message}")

        status, cluster = run_local(
            manifest, workdir, on_status=on_status, on_event=on_event, chaos=chaos, configmaps=configmaps
        )
    if status is None:
        console.print("[red]The job was deleted.[/]")
        return 1
    console.print(status_line(status, total_steps, started))
    name = manifest["metadata"]["name"]
    report = cluster.report(f"{name}-worker-0-{status.attempt}")
    if status.result:
        console.print(f"result: {display.result(status.result)}", highlight=False)
    if "accuracy" in report and not (status.result and status.result.metrics):  # a trainer that sends no metrics
        console.print(f"test accuracy: [bold]{report['accuracy']:.4f}[/]")
    if report.get("resumedFromStep"):
        resumed = int(report["resumedFromStep"])
        redone = f": {chaos.at_step - resumed} steps redone" if chaos and chaos.at_step >= resumed else ""
        console.print(f"attempt {status.attempt} resumed from the checkpoint at step {resumed}{redone}")
    if status.last_failure and status.phase.value == "Failed":
        console.print(f"[red]last failure[/]: {status.last_failure.pod} {status.last_failure.reason}")
        if status.last_failure.log_tail:
            console.print(status.last_failure.log_tail)
    console.print(f"logs and checkpoints: {workdir}")
    return 0 if status.phase.value == "Succeeded" else 1
