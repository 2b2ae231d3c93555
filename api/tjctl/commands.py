"""tjctl's commands on the cluster, through the SDK: get, list, submit, delete, suspend, resume, timeline."""

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tjctl import display
from tjctl.exits import OK, UsageError, exit_code, report, user_file
from tjctl.follow import phase_of
from tjctl.local_checks import readable
from tjctl.output import RESOURCE, Ui, name_of, show_document, show_jobs, suspended
from trainingjob.model import Phase, TrainingJob
from trainingjob_sdk import Client, TrainingJobError


def get(client: Client, args: argparse.Namespace, ui: Ui) -> int:
    show_jobs(ui, [client.get(args.name)], args.output or "table", one=True)
    return OK


def list_jobs(client: Client, args: argparse.Namespace, ui: Ui) -> int:
    jobs = client.list(selector=args.selector, all_namespaces=args.all_namespaces)
    output = args.output or "table"
    if not jobs and output in ("table", "wide"):
        where = "" if args.all_namespaces else f" in {client.namespace} namespace"
        ui.note(f"No resources found{where}.")
        return OK
    show_jobs(ui, jobs, output, all_namespaces=args.all_namespaces)
    return OK


def _source(args: argparse.Namespace) -> tuple[bytes | Path, str]:
    """What to read (the text of stdin for '-', else the path) and how messages name it."""
    given = [each for each in (args.file, args.filename) if each is not None]
    if len(given) != 1:
        raise UsageError("submit: give one FILE (or -f FILE; '-' reads stdin)")
    if str(given[0]) == "-":
        return sys.stdin.buffer.read(), "stdin"
    readable(Path(given[0]))
    return Path(given[0]), str(given[0])


def submit(client: Client, args: argparse.Namespace, ui: Ui) -> int:
    """Create every document of the file, each checked (its namespace too) before any is created; go on past one
    the server refuses and exit with the first refusal's code."""
    source, where = _source(args)
    bodies = client.check_all(source, args.namespace, where=where)
    created: list[TrainingJob] = []
    code = OK
    for body in bodies:
        try:
            job = client.create(body)
        except TrainingJobError as error:
            code = code or exit_code(error)
            report(error, ui.err)
            continue
        created.append(job)
        if not args.output:
            ui.out.print(f"{name_of(job)} created", markup=False)
    if args.output and created:
        show_jobs(ui, created, args.output, one=len(bodies) == 1)
    return code


def delete(client: Client, args: argparse.Namespace, ui: Ui) -> int:
    client.delete(args.name)
    ui.out.print(f"{RESOURCE}/{args.name}" + ("" if args.output == "name" else " deleted"), markup=False)
    return OK


def _checkpoint(job: TrainingJob) -> str:
    found = job.status.last_checkpoint if job.status is not None else None
    return f"its newest checkpoint (step {found.step})" if found is not None else "the start: it has no checkpoint"


def _resumed_from(job: TrainingJob) -> str:
    """Where the running attempt resumed from, as its trainer said (the newest complete checkpoint on the volume);
    "" before it has said."""
    status = job.status
    progress = status.progress if status is not None else None
    if status is None or progress is None or progress.attempt != status.attempt or progress.resumed_from_step is None:
        return ""
    return f" from the checkpoint at step {progress.resumed_from_step}"


def _said(before: TrainingJob, after: TrainingJob, suspend: bool, waited: bool) -> str:
    """What the request did, not the phase the job had when it was answered (the operator has not acted yet)."""
    was = suspended(before)
    name = name_of(after)
    if was == suspend:
        return f"{name} was {'suspended' if suspend else 'not suspended'} already (phase {phase_of(before)})"
    if suspend and waited:
        return f"{name} suspended: its pods checkpointed and stopped (phase {phase_of(after)})"
    if suspend:
        starts = before.status is None or before.status.phase == Phase.PENDING
        return f"{name} suspended: " + ("it does not start until resumed" if starts else "its pods checkpoint and stop")
    if waited:
        return f"{name} resumed: running again{_resumed_from(after)} (phase {phase_of(after)})"
    return f"{name} resumed: it starts again from {_checkpoint(after)}"


def set_suspended(client: Client, args: argparse.Namespace, ui: Ui, suspend: bool) -> int:
    before = client.get(args.name)
    after = client.suspend(args.name) if suspend else client.resume(args.name)
    waited = bool(args.wait) and suspended(before) != suspend
    if waited:
        wanted = {Phase.SUSPENDED} if suspend else {Phase.RUNNING, Phase.SUCCEEDED}

        def there(job: TrainingJob) -> bool:
            return job.status is not None and job.status.phase in wanted

        what = " or ".join(sorted(wanted))
        after = client.wait(args.name, there, timeout=args.timeout, what=f"phase {what}")
    if args.output:
        show_jobs(ui, [after], args.output, one=True)
    else:
        ui.out.print(_said(before, after, suspend, waited), markup=False)
    return OK


def suspend(client: Client, args: argparse.Namespace, ui: Ui) -> int:
    return set_suspended(client, args, ui, True)


def resume(client: Client, args: argparse.Namespace, ui: Ui) -> int:
    return set_suspended(client, args, ui, False)


def timeline(client: Client, args: argparse.Namespace, ui: Ui) -> int:
    if args.chrome:
        trace = json.dumps(client.timeline(args.name, chrome=True))
        with user_file(args.chrome):
            args.chrome.write_text(trace)
        ui.out.print(f"wrote {args.chrome}: open it in chrome://tracing or ui.perfetto.dev", markup=False)
        return OK
    found: dict[str, Any] = client.timeline(args.name)
    if args.output in ("json", "yaml"):
        show_document(ui, found, args.output)
    elif args.output == "name":
        raise UsageError("timeline: -o name is not an output of a timeline (table, json or yaml)")
    else:
        ui.out.print(display.timeline(found), highlight=False)
    return OK
