"""tjctl's sweep commands on a cluster, through the SDK: submit, list, get (the trials ranked), delete."""

import argparse
from pathlib import Path

from rich.table import Table

from tjctl.exits import OK
from tjctl.local_checks import readable
from tjctl.output import Ui, as_list, dump
from tjctl.sweep_run import parameters, ranked
from trainingjob.model import GROUP
from trainingjob.model.sweep import SWEEP_SINGULAR, TrainingSweep
from trainingjob_sdk import Client

RESOURCE = f"{SWEEP_SINGULAR}.{GROUP}"  # trainingsweep.trainingjob.io, as kubectl names the kind


def _name(sweep: TrainingSweep) -> str:
    return f"{RESOURCE}/{sweep.metadata.name}"


def submit(client: Client, args: argparse.Namespace, ui: Ui) -> int:
    """Create the sweep of the file, checked by the model first (a parameter the job would refuse is named)."""
    readable(Path(args.file))
    sweep = client.sweeps.create(Path(args.file))
    if args.output:
        _show(ui, [sweep], args.output, one=True)
    else:
        ui.out.print(f"{_name(sweep)} created", markup=False)
    return OK


def list_sweeps(client: Client, args: argparse.Namespace, ui: Ui) -> int:
    sweeps = client.sweeps.list()
    if not sweeps and (args.output or "table") == "table":
        ui.note(f"No resources found in {client.namespace} namespace.")
        return OK
    _show(ui, sweeps, args.output)
    return OK


def get(client: Client, args: argparse.Namespace, ui: Ui) -> int:
    sweep = client.sweeps.get(args.name)
    _show(ui, [sweep], args.output, one=True)
    status = sweep.status
    if (args.output or "table") == "table" and status is not None and status.trials:
        ui.out.print()
        ui.out.print(ranked(status.trials, sweep))
        if status.best_trial is not None:
            best = status.best_trial
            metric = sweep.spec.objective.metric
            values = {p.name: best.parameters[p.name] for p in sweep.spec.parameters if p.name in best.parameters}
            ui.out.print(f"best: trial {best.number} ({best.job_name}), {metric} {best.objective:.4f} with "
                         f"{parameters(values)}", markup=False)  # fmt: skip
    return OK


def delete(client: Client, args: argparse.Namespace, ui: Ui) -> int:
    client.sweeps.delete(args.name)
    ui.out.print(f"{RESOURCE}/{args.name}" + ("" if args.output == "name" else " deleted"), markup=False)
    return OK


def _show(ui: Ui, sweeps: list[TrainingSweep], output: str | None, *, one: bool = False) -> None:
    """`sweeps` as -o says: a table (NAME, PHASE, TRIALS, counts, BEST), their manifests, or their names."""
    if output == "name":
        ui.write("".join(f"{_name(s)}\n" for s in sweeps))
    elif output in ("json", "yaml"):
        manifests = [s.to_manifest() for s in sweeps]
        ui.write(dump(manifests[0] if one else as_list(manifests), output))
    else:
        ui.out.print(table(sweeps))


def table(sweeps: list[TrainingSweep]) -> Table:
    made = Table(box=None, pad_edge=False)
    for column in ("NAME", "PHASE", "TRIALS", "RUNNING", "SUCCEEDED", "PRUNED", "FAILED", "BEST"):
        made.add_column(column)
    for sweep in sweeps:
        status = sweep.status
        counts, best = (status.counts, status.best_trial) if status is not None else (None, None)
        started = status.counts.started if status is not None else 0
        best_text = f"{sweep.spec.objective.metric} {best.objective:.4f} (trial {best.number})" if best else "-"
        made.add_row(
            str(sweep.metadata.name),
            status.phase.value if status is not None else "",
            f"{started}/{sweep.spec.max_trials}",
            *(str(getattr(counts, field)) if counts else "0" for field in ("running", "succeeded", "pruned", "failed")),
            best_text,
        )
    return made
