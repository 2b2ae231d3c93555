"""Following a job on the cluster: `logs` (of an attempt, or what the operator kept of a failed one), `wait` and
`watch` (the SDK's watch, never polling)."""

import argparse
import re
import time
from collections.abc import Callable

from tjctl import display
from tjctl.exits import FAILED, OK, UsageError
from tjctl.output import RESOURCE, Ui
from tjctl.progress_bar import JobProgress, status_line
from trainingjob.children.naming import Replica
from trainingjob.model import ConditionType, Phase, TrainingJob, TrainingJobSpec
from trainingjob_sdk import Client, Invalid, NotFound
from trainingjob_sdk.pods import parse_replica

DEFAULT_REPLICA = "worker-0"
TARGETS = {each.value.lower(): each.value for each in (*Phase, *ConditionType)}
DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?")


def duration(text: str) -> float:
    """--timeout: 600, 600s, 10m, 1h30m, 2.5m as seconds (argparse type: an error is a usage error)."""
    found = DURATION.fullmatch(text.strip())
    if text.replace(".", "", 1).isdigit():
        return float(text)
    if not text.strip() or found is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 600, 600s, 10m or 1h30m")
    hours, minutes, seconds = (float(part or 0) for part in found.groups())
    return hours * 3600 + minutes * 60 + seconds


def whole(least: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least `least` (--tail 0 and more, --attempt 1 and more)."""

    def parse(text: str) -> int:
        if not (text.strip().isascii() and text.strip().isdigit()) or int(text) < least:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of {least} or more")
        return int(text)

    return parse


def target(text: str) -> str:
    """--for: a phase or a condition type, any case, with kubectl's condition= (or phase=) before it if wanted."""
    name = text.split("=", 1)[1] if text.lower().startswith(("condition=", "phase=")) else text
    if name.lower() not in TARGETS:
        raise argparse.ArgumentTypeError(f"{text!r} is none of {', '.join(sorted(set(TARGETS.values())))}")
    return str(TARGETS[name.lower()])


def phase_of(job: TrainingJob | None) -> str:
    return job.status.phase.value if job is not None and job.status is not None else "unknown"


def wait(client: Client, args: argparse.Namespace, ui: Ui) -> int:
    """Exit 0 once the job reaches --for (default: Succeeded); 1 when it fails instead, or finishes without
    reaching it (JobFailed, JobFinished); 3 after --timeout (WaitTimeout)."""
    until = args.until or Phase.SUCCEEDED.value
    job = client.wait(args.name, until, timeout=args.timeout)
    ui.out.print(f"{RESOURCE}/{args.name} condition met: {until} (phase {phase_of(job)})", markup=False)
    return OK


def _total_steps(job: TrainingJob) -> int | None:
    spec = job.spec if isinstance(job.spec, TrainingJobSpec) else None  # one stored before the model changed: raw
    return spec.trainer.steps if spec is not None and spec.trainer is not None else None


def watch(client: Client, args: argparse.Namespace, ui: Ui) -> int:
    """A progress bar and a line per phase until the job ends; 0 when it succeeded."""
    started, last = time.monotonic(), None
    with JobProgress(ui.out) as bar:
        for job in client.watch(args.name):
            last = job
            bar.total_steps = _total_steps(job)
            if job.status is not None:
                bar.update(job.status)
    if last is None or last.status is None:
        return FAILED
    ui.out.print(status_line(last.status, _total_steps(last), started))
    if last.status.result:
        ui.out.print(f"result: {display.result(last.status.result)}", markup=False)
    return OK if last.status.phase == Phase.SUCCEEDED else FAILED


def _attempt(client: Client, args: argparse.Namespace) -> int | None:
    """The attempt asked for: --attempt N, or the one before the current (--previous-attempt), or None (now)."""
    if args.attempt is not None:
        return int(args.attempt)
    if not args.previous_attempt:
        return None
    current = client.get(args.name).status
    attempt = current.attempt if current is not None else 0
    if attempt < 2:
        raise UsageError(f"--previous-attempt: trainingjob {args.name!r} is in attempt {attempt}: none came before")
    return attempt - 1


def logs(client: Client, args: argparse.Namespace, ui: Ui) -> int:
    """A replica's log as it comes; of an earlier attempt whose pods are gone, the lines the operator kept."""
    replica = args.replica or DEFAULT_REPLICA
    try:
        parse_replica(replica)
    except Invalid as error:
        raise UsageError(f"--replica {replica}: {error.message}") from None
    attempt = _attempt(client, args)
    try:
        for line in client.logs(args.name, replica=replica, follow=args.follow, tail=args.tail, attempt=attempt):
            ui.write(line)
    except NotFound as error:
        if attempt is None or error.reason == "LogsNotAvailable":
            raise
        return _kept(client, args, attempt, replica, ui)
    return OK


def _kept(client: Client, args: argparse.Namespace, attempt: int, replica: str, ui: Ui) -> int:
    """The failed pod's last lines from the job's status, when its last failure was in `attempt` (and of the
    replica asked for, if one was)."""
    failure = client.last_failure(args.name)
    if failure is None or failure.attempt != attempt or not failure.log_tail:
        since = f" (its last failure is of attempt {failure.attempt})" if failure and failure.attempt != attempt else ""
        message = f"no pod of attempt {attempt} of trainingjob {args.name!r} is left, and the operator kept no lines"
        raise NotFound(f"{message} of its log{since}", reason="LogsGone")
    if args.replica:
        slot: Replica = parse_replica(args.replica)
        if slot.pod_name(args.name, attempt) != failure.pod:
            message = f"the pod of {args.replica} in attempt {attempt} is gone; the operator kept the last lines of"
            raise NotFound(f"{message} {failure.pod} only (leave out --replica to see them)", reason="LogsGone")
    ui.note(
        f"the pod of {replica} in attempt {attempt} is gone: these are the last lines of {failure.pod}'s log that the"
        f" operator kept when it failed ({failure.reason})"
    )
    kept = failure.log_tail.splitlines(keepends=True)
    shown = kept[max(0, len(kept) - args.tail) :] if args.tail is not None else kept
    ui.write("".join(shown))
    if shown and not shown[-1].endswith("\n"):
        ui.write("\n")
    return OK
