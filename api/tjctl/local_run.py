"""`tjctl run`: a job on this machine with a live progress bar, then its outcome."""

import argparse
import logging
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from tjctl import display, local_checks
from tjctl.exits import FAILED, OK
from tjctl.local_configmaps import configmaps_in
from tjctl.output import Ui
from tjctl.progress_bar import JobProgress, status_line
from trainingjob.local.capacity import Capacity
from trainingjob.local.cluster import Chaos, LocalCluster, run_local
from trainingjob.local.files import ConfigMaps
from trainingjob.model import TrainingJobStatus
from trainingjob.plan import Event


def command(args: argparse.Namespace, ui: Ui) -> int:
    """Check the file, --kill and this machine before anything starts; then run the job to its end."""
    manifest, job = local_checks.load(args.file)
    configmaps = configmaps_in(args.file.resolve().parent)  # what the pods' ConfigMap volumes hold
    local_checks.check_configmaps(job, configmaps, "tjctl run")
    chaos = local_checks.chaos(args.kill, job)
    local_checks.check_programs(job)
    workdir = args.workdir or Path(".tjctl") / str(job.metadata.name)
    local_checks.claim_workdir(workdir, named=args.workdir is not None)
    kept = () if args.resume else ("checkpoints", "logs")
    local_checks.clear_workdir(workdir, ("configmaps", "volumes", *kept))
    total = job.spec.trainer.steps if job.spec.trainer else None
    return run(manifest, total, workdir, chaos, ui.out, configmaps=configmaps, capacity=args.capacity)


def run(
    manifest: dict[str, Any],
    total_steps: int | None,
    workdir: Path,
    chaos: Chaos | None,
    console: Console,
    *,
    configmaps: ConfigMaps | None = None,
    capacity: Capacity | None = None,
) -> int:
    """Run to the end; 0 when the job succeeded. `configmaps` stand in for the cluster's (name -> data); `capacity`:
    worker slots over the run (local/capacity.py)."""
    # The operator's decision log says what the events printed below say: keep it off the console.
    logging.getLogger("trainingjob").addHandler(logging.NullHandler())
    started = time.monotonic()
    with JobProgress(console, total_steps, announce=False) as bar:

        def on_event(event: Event) -> None:
            style = "yellow" if event.type == "Warning" else "green"
            console.print(Text.assemble((event.reason, style), f": {event.message}"))

        status, cluster = run_local(
            manifest,
            workdir,
            on_status=bar.update,
            on_event=on_event,
            chaos=chaos,
            configmaps=configmaps,
            capacity=capacity,
        )
    if status is None:
        console.print("[red]The job was deleted.[/]")
        return FAILED
    console.print(status_line(status, total_steps, started))
    _outcome(manifest, status, cluster, chaos, console)
    console.print(f"logs and checkpoints: {workdir}", highlight=False)
    return OK if status.phase.value == "Succeeded" else FAILED


def _outcome(
    manifest: dict[str, Any], status: TrainingJobStatus, cluster: LocalCluster, chaos: Chaos | None, console: Console
) -> None:
    """The result, where the last attempt resumed from, where the time went, how often it checkpointed and why, and
    the last failure of a failed job."""
    report = cluster.report(f"{manifest['metadata']['name']}-worker-0-{status.current_pods_attempt}")
    if status.result:
        console.print(f"result: {display.result(status.result)}", highlight=False)
    if "accuracy" in report and not (status.result and status.result.metrics):  # a trainer that sends no metrics
        console.print(f"test accuracy: [bold]{report['accuracy']:.4f}[/]")
    if report.get("resumedFromStep"):
        resumed = int(report["resumedFromStep"])
        redone = f": {chaos.at_step - resumed} steps redone" if chaos and chaos.at_step >= resumed else ""
        console.print(f"attempt {status.attempt} resumed from the checkpoint at step {resumed}{redone}")
    time = display.goodput(status.goodput.model_dump(by_alias=True)) if status.goodput else ""
    if time:
        console.print(f"goodput: {time}", highlight=False)
    pacing = status.progress.checkpoint_pacing if status.progress else None
    if pacing is not None:
        console.print(f"checkpoints: {pacing.reason}", highlight=False)
    if status.last_failure and status.phase.value == "Failed":
        console.print(f"[red]last failure[/]: {status.last_failure.pod} {status.last_failure.reason}")
        if status.last_failure.log_tail:
            console.print(status.last_failure.log_tail, markup=False, highlight=False)
