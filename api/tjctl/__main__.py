"""`tjctl` (`python -m tjctl`): run a TrainingJob locally, or submit and manage TrainingJobs on a cluster."""

import argparse
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from kubernetes.client import ApiException
from rich.console import Console
from rich.live import Live

from tjctl import display, local_run
from tjctl.kube import Kube
from tjctl.manifest import ManifestError, load
from tjctl.rest import Rest, RestError
from trainingjob import crd
from trainingjob.local import Chaos
from trainingjob.local_files import configmaps_in
from trainingjob.model import Phase, TrainingJobStatus

Manifest = dict[str, Any]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tjctl", description=__doc__)
    parser.add_argument("--kubeconfig", help="kubeconfig of the cluster (default: $KUBECONFIG or ~/.kube/config)")
    parser.add_argument("-n", "--namespace", help="namespace (default: the kubeconfig context's)")
    parser.add_argument(
        "--server", default=os.environ.get("TJCTL_SERVER"), help="REST API URL ($TJCTL_SERVER); a kubeconfig when unset"
    )
    parser.add_argument(
        "--token", default=os.environ.get("TJCTL_TOKEN"), help="bearer token for --server ($TJCTL_TOKEN)"
    )
    parser.add_argument(
        "--cacert",
        type=Path,
        default=os.environ.get("TJCTL_CACERT"),
        help="CA certificate the REST API's certificate is checked against ($TJCTL_CACERT; the system's when unset)",
    )
    parser.add_argument("-o", "--output", choices=["table", "json", "yaml"], default="table")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run a job on this machine: no cluster, the same restarts and resume")
    run.add_argument("file", type=Path)
    run.add_argument("--workdir", type=Path, help="logs and checkpoints (default: .tjctl/<job name>)")
    run.add_argument(
        "--kill", metavar="REPLICA@STEP", help="SIGKILL a replica once the job reaches STEP, e.g. worker-1@250"
    )
    run.add_argument("--resume", action="store_true", help="keep the workdir's checkpoints and resume from them")
    commands.add_parser("crds", help="print the TrainingJob CRD")
    submit = commands.add_parser("submit", help="create a job on the cluster")
    submit.add_argument("file", type=Path)
    commands.add_parser("list", help="list jobs")
    timeline = commands.add_parser("timeline", help="where a job's time went: attempts, pods, failures, checkpoints")
    timeline.add_argument("name")
    timeline.add_argument(
        "--chrome", type=Path, metavar="FILE", help="write a Chrome trace (chrome://tracing, Perfetto)"
    )
    for name in ("get", "watch", "delete", "suspend", "resume", "logs"):
        sub = commands.add_parser(name, help=f"{name} a job")
        sub.add_argument("name")
        if name == "logs":
            sub.add_argument("--replica", default="worker-0", help="worker-N or ps-N (default worker-0)")
            sub.add_argument("--tail", type=int)
    return parser


def _print(objects: list[Manifest] | Manifest, output: str, console: Console) -> None:
    if output == "json":
        print(json.dumps(objects, indent=2, sort_keys=True))
    elif output == "yaml":
        print(yaml.safe_dump(objects, sort_keys=False), end="")
    else:
        console.print(display.table(objects if isinstance(objects, list) else [objects], datetime.now(UTC)))
        result = display.result_of(objects) if isinstance(objects, dict) else ""
        if result:
            console.print(f"result: {result}", highlight=False)


def _run(args: argparse.Namespace, console: Console) -> int:
    manifest, job = load(args.file)
    chaos = None
    if args.kill:
        replica, _, step = args.kill.partition("@")
        if not step.isdigit():
            raise ManifestError(f"--kill {args.kill}: expected REPLICA@STEP, e.g. worker-1@250")
        chaos = Chaos(replica, int(step))
    workdir = args.workdir or Path(".tjctl") / str(job.metadata.name)
    kept = () if args.resume else ("checkpoints", "logs")
    for folder in ("configmaps", "volumes", *kept):
        shutil.rmtree(workdir / folder, ignore_errors=True)
    total = job.spec.trainer.steps if job.spec.trainer else None
    configmaps = configmaps_in(args.file.resolve().parent)  # what the pods' ConfigMap volumes hold
    return local_run.run(manifest, total, workdir, chaos, console, configmaps=configmaps)


def _watch(kube: Kube | Rest, name: str, console: Console) -> int:
    """A live status line until the job ends; 0 when it succeeded."""
    started = time.monotonic()
    with Live(console=console, refresh_per_second=2, transient=True) as live:
        while True:
            job = kube.get(name)
            status = TrainingJobStatus.model_validate(job.get("status") or {})
            live.update(local_run.status_line(status, None, started))
            if status.phase.is_terminal:
                break
            time.sleep(1)
    console.print(local_run.status_line(status, None, started))
    if status.result:
        console.print(f"result: {display.result(status.result)}", highlight=False)
    return 0 if status.phase == Phase.SUCCEEDED else 1


def _timeline(kube: Kube | Rest, args: argparse.Namespace, console: Console) -> int:
    if args.chrome:
        args.chrome.write_text(json.dumps(kube.timeline(args.name, chrome=True)))
        console.print(f"wrote {args.chrome}: open it in chrome://tracing or ui.perfetto.dev", highlight=False)
        return 0
    found = kube.timeline(args.name, chrome=False)
    if args.output == "table":
        console.print(display.timeline(found), highlight=False)
    else:
        _print(found, args.output, console)
    return 0


def _cluster(args: argparse.Namespace, console: Console) -> int:
    if args.server and not args.token:
        raise ManifestError("--server needs --token (or $TJCTL_TOKEN)")
    kube: Kube | Rest = (
        Rest(args.server, args.token, args.namespace, args.cacert)
        if args.server
        else Kube(args.kubeconfig, args.namespace)
    )
    if args.command == "watch":
        return _watch(kube, args.name, console)
    if args.command == "timeline":
        return _timeline(kube, args, console)
    actions: dict[str, Callable[[], Any]] = {
        "submit": lambda: kube.submit(load(args.file)[0]),
        "list": kube.list,
        "get": lambda: kube.get(args.name),
        "suspend": lambda: kube.set_suspend(args.name, True),
        "resume": lambda: kube.set_suspend(args.name, False),
    }
    if args.command == "delete":
        kube.delete(args.name)
        console.print(f"trainingjob {args.name} deleted")
    elif args.command == "logs":
        print(kube.logs(args.name, args.replica, args.tail), end="")
    else:
        _print(actions[args.command](), args.output, console)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    console = Console(stderr=args.output != "table")
    try:
        if args.command == "run":
            return _run(args, console)
        if args.command == "crds":
            print(crd.render(), end="")
            return 0
        return _cluster(args, console)
    except ManifestError as error:
        console.print(f"[red]error:[/] {error}", highlight=False)
        return 2
    except RestError as error:
        console.print(f"[red]error from the REST API:[/] {error}", highlight=False)
        return 1
    except ApiException as error:
        detail = json.loads(error.body).get("message") if error.body else error.reason
        console.print(f"[red]error from the cluster ({error.status}):[/] {detail}", highlight=False)
        return 1


if __name__ == "__main__":
    sys.exit(main())
