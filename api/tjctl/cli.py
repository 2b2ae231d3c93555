"""tjctl's command line: the parser (flags before or after the command), and main, which maps every error it
expects to a line and an exit code."""

import argparse
import logging
import os
import sys
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

import shtab

import trainingjob
from tjctl import commands, follow, local_run, sweep_commands, sweep_run
from tjctl.exits import EPILOG, INTERRUPTED, OK, UsageError, file_problem, report
from tjctl.output import FORMATS, Ui, name_of
from trainingjob.generate import crd
from trainingjob.local import capacity
from trainingjob.local.capacity import Capacity
from trainingjob_sdk import Client, RestJobs, TrainingJobError, connect
from trainingjob_sdk.errors import one_line

Cluster = Callable[[Client, argparse.Namespace, Ui], int]
DESCRIPTION = "Run a TrainingJob on this machine, or submit and manage TrainingJobs on a cluster."
BROKEN_PIPE = 141  # 128 + SIGPIPE, as a shell reports a program whose reader went away (tjctl logs x | head)


def version() -> str:
    return str(getattr(trainingjob, "__version__", "unknown"))


def _connection(parser: argparse.ArgumentParser, top: bool) -> None:
    """The flags that say which cluster; on the commands with SUPPRESS as default, so that they override the
    top-level ones only when given after the command."""

    def default(value: Any) -> Any:
        return value if top else argparse.SUPPRESS

    parser.add_argument("--kubeconfig", default=default(None), help="kubeconfig (default: $KUBECONFIG, ~/.kube/config)")
    parser.add_argument("--context", default=default(None), help="the kubeconfig context (default: its current one)")
    parser.add_argument("-n", "--namespace", default=default(None), help="namespace (default: the context's)")
    server = "REST API URL (default: $TJCTL_SERVER, unless --kubeconfig or --context is given; unset: the kubeconfig)"
    parser.add_argument("--server", default=default(None), help=server)
    parser.add_argument("--token", default=default(None), help="bearer token for --server ($TJCTL_TOKEN)")
    parser.add_argument("--cacert", type=Path, default=default(None), help="CA of the REST API ($TJCTL_CACERT)")


def _output(parser: argparse.ArgumentParser, top: bool) -> None:
    parser.add_argument(
        "-o", "--output", choices=FORMATS, default=None if top else argparse.SUPPRESS, help="output format"
    )


def _file(action: argparse.Action) -> None:
    action.complete = shtab.FILE  # type: ignore[attr-defined]  # shtab's completion of file names


def _capacity(text: str) -> Capacity:
    """--capacity N, N,M@STEP,... or N,M@SECONDSs,...: worker slots from the start, then from each step (second) on."""
    try:
        return capacity.parse(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _local_commands(sub: Any) -> None:
    run = sub.add_parser("run", help="run a job on this machine: no cluster, the same restarts and resume")
    _file(run.add_argument("file", type=Path, help="the TrainingJob manifest"))
    run.add_argument("--workdir", type=Path, help="logs and checkpoints (default: .tjctl/<job name>)")
    run.add_argument("--kill", metavar="REPLICA@STEP", help="SIGKILL a replica once it reaches STEP: worker-1@250")
    run.add_argument("--resume", action="store_true", help="keep the workdir's checkpoints and resume from them")
    run.add_argument(
        "--capacity",
        type=_capacity,
        metavar="N[,N@STEP...]",
        help="run at most N worker pods at once (from STEP on, or from SECONDS with N@SECONDSs), the others wait "
        "unschedulable, the last go when N drops: an elastic job (minReplicas) shrinks after 5 s and grows back at a "
        "checkpoint (4,2@150,4@300)",
    )
    run.set_defaults(local=local_run.command)
    sub.add_parser("crds", help="print the TrainingJob and TrainingSweep CRDs").set_defaults(local=_crds)
    completion = sub.add_parser("completion", help="print a shell completion script: source <(tjctl completion bash)")
    completion.add_argument("shell", choices=shtab.SUPPORTED_SHELLS)
    completion.set_defaults(local=_completion)


class _Adder:
    """Adds a cluster command with the connection flags (and -o) after it too."""

    def __init__(self, sub: Any, cluster: argparse.ArgumentParser, output: argparse.ArgumentParser) -> None:
        self.sub, self.cluster, self.output = sub, cluster, output

    def __call__(self, name: str, help: str, handler: Cluster, *, outputs: bool = True) -> argparse.ArgumentParser:
        parents = [self.cluster, self.output] if outputs else [self.cluster]
        made: argparse.ArgumentParser = self.sub.add_parser(name, help=help, description=help, parents=parents)
        made.set_defaults(cluster=handler)
        return made


def _sweep_commands(sub: Any, cluster: argparse.ArgumentParser, output: argparse.ArgumentParser) -> None:
    sweep = sub.add_parser("sweep", help="hyperparameter sweeps: run one on this machine, or on a cluster")
    verbs = sweep.add_subparsers(dest="verb", required=True, metavar="VERB")
    trials = verbs.add_parser("run", help="run a sweep's trials as local jobs; rank them by its objective")
    _file(trials.add_argument("file", type=Path, help="the TrainingSweep manifest"))
    trials.add_argument("--workdir", type=Path, help="each trial's logs (default: .tjctl/<sweep name>)")
    trials.add_argument(
        "--parallelism", type=follow.whole(1), metavar="N", help="trials at once (default: the sweep's parallelism)"
    )
    trials.set_defaults(local=sweep_run.command)
    add = _Adder(verbs, cluster, output)
    _file(add("submit", "create the sweep of a file on the cluster", sweep_commands.submit).add_argument("file"))
    add("list", "list the sweeps of the namespace", sweep_commands.list_sweeps)
    add("get", "show a sweep and its trials, best first", sweep_commands.get).add_argument("name")
    add("delete", "delete a sweep (its trials' jobs go after it)", sweep_commands.delete).add_argument("name")


def _manage_commands(add: _Adder) -> None:
    submit = add("submit", "create the jobs of a file (every document; generateName allowed)", commands.submit)
    _file(submit.add_argument("file", nargs="?", help="a manifest, several documents allowed; '-' reads stdin"))
    _file(submit.add_argument("-f", "--filename", help="the same as FILE, as kubectl takes it"))
    listing = add("list", "list jobs", commands.list_jobs)
    listing.add_argument("-A", "--all-namespaces", action="store_true", help="of every namespace")
    listing.add_argument("-l", "--selector", help="only jobs whose labels match, e.g. team=vision,tier!=test")
    add("get", "show a job", commands.get).add_argument("name")
    add("delete", "delete a job (its pods go after it)", commands.delete).add_argument("name")
    for verb, handler in (("suspend", commands.suspend), ("resume", commands.resume)):
        toggled = add(verb, f"{verb} a job", handler)
        toggled.add_argument("name")
        toggled.add_argument("--wait", action="store_true", help="until the operator has done it")
        toggled.add_argument("--timeout", type=follow.duration, help="of --wait: 600, 600s, 10m (default: none)")
    timeline = add("timeline", "where a job's time went: attempts, pods, failures, checkpoints", commands.timeline)
    timeline.add_argument("name")
    _file(timeline.add_argument("--chrome", type=Path, metavar="FILE", help="write a Chrome trace (Perfetto)"))


def _observe_commands(add: _Adder) -> None:
    add("watch", "a job's progress until it ends", follow.watch, outputs=False).add_argument("name")
    wait = add("wait", "wait until a job reaches a phase or condition", follow.wait, outputs=False)
    wait.add_argument("name")
    wait.add_argument(
        "--for", dest="until", type=follow.target, metavar="PHASE", help="Succeeded (default), Failed, Running, "
        "Suspended, Restarting, Pending, Created: the phase, or a condition that is True"
    )  # fmt: skip
    wait.add_argument("--timeout", type=follow.duration, help="600, 600s, 10m, 1h30m (default: none)")
    logs = add("logs", "a replica's log, as it comes", follow.logs, outputs=False)
    logs.add_argument("name")
    logs.add_argument("--replica", help=f"worker-N or ps-N (default {follow.DEFAULT_REPLICA})")
    logs.add_argument("-f", "--follow", action="store_true", help="until the container ends")
    logs.add_argument("--tail", type=follow.whole(0), metavar="N", help="only the last N lines")
    which = logs.add_mutually_exclusive_group()
    which.add_argument(
        "--previous-attempt", action="store_true", help="of the attempt before the current one; when its pods are "
        "gone, the failed pod's last lines as the operator kept them"
    )  # fmt: skip
    which.add_argument("--attempt", type=follow.whole(1), metavar="N", help="of attempt N (the first is 1)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tjctl", description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"tjctl {version()}")
    _connection(parser, top=True)
    _output(parser, top=True)
    cluster, output = argparse.ArgumentParser(add_help=False), argparse.ArgumentParser(add_help=False)
    _connection(cluster, top=False)
    _output(output, top=False)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _local_commands(sub)
    _sweep_commands(sub, cluster, output)
    add = _Adder(sub, cluster, output)
    _manage_commands(add)
    _observe_commands(add)
    return parser


def _crds(args: argparse.Namespace, ui: Ui) -> int:
    ui.write(crd.render_all())
    return OK


def _completion(args: argparse.Namespace, ui: Ui) -> int:
    ui.write(shtab.complete(build_parser(), shell=args.shell))
    return OK


def _cluster(args: argparse.Namespace, ui: Ui) -> int:
    if args.server and (args.kubeconfig or args.context):
        raise UsageError("--server names the REST API, --kubeconfig and --context a kubeconfig's cluster: give one")
    token = args.token or os.environ.get("TJCTL_TOKEN")
    if args.server and not token:
        raise UsageError("--server needs --token (or $TJCTL_TOKEN)")
    if token and not (token.isascii() and token.isprintable()):
        raise UsageError("--token (or $TJCTL_TOKEN) must be printable ASCII: no other letters, no newline")
    with connect(
        server=args.server, token=args.token, kubeconfig=args.kubeconfig, namespace=args.namespace,
        context=args.context, cacert=args.cacert,
    ) as client:  # fmt: skip
        transport = client.transport
        if isinstance(transport, RestJobs) and transport.unencrypted:
            ui.note(f"warning: the token is sent unencrypted to {transport.server} (use https:// beyond this machine)")
        handler: Cluster = args.cluster
        return handler(client, args, ui)


def _failed(error: TrainingJobError | UsageError, ui: Ui) -> int:
    """The jobs created before the error stopped create_all, then the error."""
    for job in error.created if isinstance(error, TrainingJobError) else []:
        ui.out.print(f"{name_of(job)} created", markup=False)
    return report(error, ui.err)


def _run(args: argparse.Namespace, ui: Ui) -> int:
    try:
        return int(args.local(args, ui)) if hasattr(args, "local") else _cluster(args, ui)
    except KeyboardInterrupt:
        ui.note("interrupted")
        return INTERRUPTED
    except (TrainingJobError, UsageError) as error:
        return _failed(error, ui)
    except BrokenPipeError:
        raise
    except OSError as error:  # a file of the user's (the SDK says a server's errors as TrainingJobError)
        return report(file_problem(error), ui.err)


class _OneLine(logging.Handler):
    """The errors libraries log (the kubernetes client's of a credential plugin), as one line of tjctl's on stderr."""

    def __init__(self, ui: Ui) -> None:
        super().__init__(logging.ERROR)  # not urllib3's warnings of retries: the error after them says it
        self.ui = ui

    def emit(self, record: logging.LogRecord) -> None:
        self.ui.note(f"warning: {one_line(record.getMessage())}")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    ui = Ui.create()
    logged = _OneLine(ui)
    logging.getLogger().addHandler(logged)
    try:
        return _run(args, ui)
    except BrokenPipeError:  # stdout's reader went away, or stderr's while an error was said
        devnull = os.open(os.devnull, os.O_WRONLY)
        for stream in (sys.stdout, sys.stderr):
            with suppress(OSError, ValueError):
                os.dup2(devnull, stream.fileno())  # no second error as Python exits
        return BROKEN_PIPE
    finally:
        logging.getLogger().removeHandler(logged)
