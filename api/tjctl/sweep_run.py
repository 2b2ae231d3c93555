"""`tjctl sweep run`: a TrainingSweep on this machine, its trials as local jobs. A line as each trial starts and
ends (with its parameters, its objective, or why it was stopped), then the trials ranked, best first."""

import argparse
import importlib.util
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tjctl import display, local_checks
from tjctl.exits import FAILED, OK, UsageError
from tjctl.local_configmaps import configmaps_in
from tjctl.output import Ui
from trainingjob.local.files import ConfigMaps
from trainingjob.model.sweep import Goal, TrainingSweep
from trainingjob.model.sweep_status import SweepPhase, TrainingSweepStatus, Trial, TrialPhase
from trainingjob.plan import Event

INSTALL = "pip install 'trainingjob[trainer,sweep]'"
STYLES = {TrialPhase.SUCCEEDED: "green", TrialPhase.PRUNED: "yellow", TrialPhase.FAILED: "red"}


def command(args: argparse.Namespace, ui: Ui) -> int:
    """Check the file and this machine before anything starts; then run the sweep to its end."""
    manifest, sweep = local_checks.load_sweep(args.file, parallelism=args.parallelism)
    if importlib.util.find_spec("optuna") is None:
        raise UsageError(
            f"tjctl sweep run: the samplers and pruners come from Optuna, which this Python lacks: {INSTALL}"
        )
    trial = local_checks.trial_job(sweep)
    local_checks.check_programs(trial)
    configmaps = configmaps_in(args.file.resolve().parent)  # what the trials' ConfigMap volumes hold
    local_checks.check_configmaps(trial, configmaps, "tjctl sweep run")
    workdir = args.workdir or Path(".tjctl") / str(sweep.metadata.name)
    local_checks.claim_workdir(workdir, named=args.workdir is not None)
    local_checks.clear_workdir(workdir)  # trials are numbered from 0 again: no folder of an earlier run
    return run(manifest, sweep, workdir, ui.out, configmaps=configmaps)


def run(
    manifest: dict[str, Any],
    sweep: TrainingSweep,
    workdir: Path,
    console: Console,
    *,
    configmaps: ConfigMaps | None = None,
) -> int:
    """Run to the end; 0 when the sweep succeeded (a trial succeeded and none went over the failure budget)."""
    from trainingjob.local.sweep import run_sweep  # noqa: PLC0415  (it imports Optuna: only for this command)

    logging.getLogger("trainingjob").addHandler(logging.NullHandler())
    started, seen = time.monotonic(), [list[Trial]()]
    metric = sweep.spec.objective.metric

    def on_status(status: TrainingSweepStatus) -> None:
        for line in changes(seen[0], status.trials, metric):
            console.print(line)
        seen[0] = list(status.trials)

    def on_event(job: str, event: Event) -> None:
        if event.type == "Warning":
            console.print(Text.assemble(f"{job} ", (event.reason, "yellow"), f": {event.message}"))

    status, _ = run_sweep(manifest, workdir, on_status=on_status, on_event=on_event, configmaps=configmaps)
    if status is None:
        console.print("[red]The sweep ended without a status.[/]")
        return FAILED
    console.print(ranked(status.trials, sweep))
    console.print(summary(status, metric, time.monotonic() - started), highlight=False)
    console.print(f"logs: {workdir}/<trial job>/logs", highlight=False)
    return OK if status.phase == SweepPhase.SUCCEEDED else FAILED


def parameters(values: Mapping[str, Any]) -> str:
    """'lr=0.00316, batch=64, optimizer=adam'."""
    return ", ".join(
        f"{name}={value:.3g}" if isinstance(value, float) else f"{name}={value}" for name, value in values.items()
    )


def changes(before: Sequence[Trial], after: Sequence[Trial], metric: str) -> list[Text]:
    """A line for each trial that started or finished between two statuses."""
    old = {t.number: t for t in before}
    lines = []
    for trial in after:
        previous = old.get(trial.number)
        if previous is None:
            lines.append(
                Text.assemble(f"trial {trial.number} ", ("started", "cyan"), f": {parameters(trial.parameters)}")
            )
        if trial.phase.is_finished and (previous is None or not previous.phase.is_finished):
            lines.append(
                Text.assemble(
                    f"trial {trial.number} ", (trial.phase.value, STYLES[trial.phase]), f": {_why(trial, metric)}"
                )
            )
    return lines


def _why(trial: Trial, metric: str) -> str:
    if trial.phase == TrialPhase.SUCCEEDED and trial.objective is not None:
        return f"{metric} {trial.objective:.4f}"
    return trial.message or str(trial.reason or "")


def ranked(trials: Sequence[Trial], sweep: TrainingSweep) -> Table:
    """The trials, best first: those with an objective by it, whatever their phase (shown beside: a pruned trial's
    objective is the last before it was stopped), then the rest."""
    sign = -1.0 if sweep.spec.objective.goal == Goal.MAXIMIZE else 1.0

    def key(trial: Trial) -> tuple[float, int]:
        return (sign * trial.objective if trial.objective is not None else float("inf"), trial.number)

    names = [p.name for p in sweep.spec.parameters]
    table = Table(box=None, pad_edge=False)
    for column in ("TRIAL", "PHASE", sweep.spec.objective.metric.upper(), "STEP", *(n.upper() for n in names)):
        table.add_column(column)
    for trial in sorted(trials, key=key):
        value = f"{trial.objective:.4f}" if trial.objective is not None else "-"
        step = str(trial.objective_step) if trial.objective_step is not None else "-"
        cells = [parameters({n: trial.parameters.get(n, "-")}).split("=", 1)[1] for n in names]
        table.add_row(str(trial.number), Text(trial.phase.value, STYLES.get(trial.phase, "")), value, step, *cells)
    return table


def summary(status: TrainingSweepStatus, metric: str, seconds: float) -> str:
    """'Succeeded: 12 trials in 1m10s: 7 succeeded, 4 pruned, 1 failed. Best: trial 5 (digits-sweep-5), accuracy
    0.9811 with lr=0.00316, batch=64, optimizer=adam'."""
    counts, best = status.counts, status.best_trial
    line = (
        f"{status.phase.value}: {counts.started} trials in {display.duration(seconds)}: {counts.succeeded}"
        f" succeeded, {counts.pruned} pruned, {counts.failed} failed."
    )
    if best is not None:
        with_values = parameters(best.parameters)
        line += f" Best: trial {best.number} ({best.job_name}), {metric} {best.objective:.4f} with {with_values}"
    return line
