"""Benchmark: our operator against Kubeflow's training-operator (v1, PyTorchJob) on the cluster tier, alternating.

Run: python bench/bench_kubeflow.py [--repetitions N] [--scale F] [--scenarios big,many,failure] [--write-doc]
(needs TJ_CONTROLPLANE_BIN, as `make bench-kubeflow` sets; builds Kubeflow with scripts/build-kubeflow.sh on first
use). `--help` lists the size flags. Each side runs in a cluster tier of its own (etcd, kube-apiserver with an audit
log, scheduler, controller-manager, kwok with enough fake nodes), one side at a time, the order rotated every
repetition.

Sides: our operator (TJ_OPERATOR_WORKERS=8), Kubeflow unthrottled and Kubeflow with its default client rate limit
(both --controller-threads=8). Scenarios, each in a fresh namespace that is deleted (and waited out) after it
(--scenarios runs a subset, by the names below):
  1. big: 1 job x 1,024 ranks created: -> every pod Running.
  2. many: 1,000 jobs x 8 ranks created at once from a thread pool: -> all 8,000 pods Running.
  3. failure: a 256-rank job Running, one rank's pod marked Failed (exit code 1): -> every rank Running again.
Per scenario and side: wall time, operator CPU seconds and peak RSS, the apiserver requests of the operator's own
user (from the audit log), and the status lag of each job (its last pod Running -> its status saying Running).
Then "apiserver reads per reconcile of an unchanged job": 20 jobs x 2 ranks Running, 20 s window.
Prints a table of medians and ratios; --write-doc regenerates docs/performance.md.

This file runs the sides and parses the flags; the parts: kubeflow_plane.py (the audited cluster tier and the
audit log), kubeflow_books.py (watches), kubeflow_sides.py (the two operators), kubeflow_measure.py (one scenario
measured) and kubeflow_report.py (the tables and docs/performance.md).
"""

import argparse
import contextlib
import math
import shutil
import signal
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "operator")]

from bench import kubeflow  # noqa: E402
from bench.kubeflow_measure import Results, Run, Scenario, measure, measure_idle, warm_up  # noqa: E402
from bench.kubeflow_plane import (  # noqa: E402
    MARKER_USER,
    PODS_PER_NODE,
    AuditedControlPlane,
    AuditLog,
    add_nodes,
    api_client,
)
from bench.kubeflow_report import DOC, report, summary, write_doc  # noqa: E402
from bench.kubeflow_sides import KF_DEFAULT, KF_UNTHROTTLED, OURS, SIDES, Contender, Kubeflow, Ours  # noqa: E402
from kubernetes import client  # noqa: E402
from testbed.controlplane import Binaries  # noqa: E402
from testbed.crds import install_crd as install_trainingjob_crd  # noqa: E402

SCENARIOS = ("big", "many", "failure")


def side_run(
    contender: Contender, results: Results, args: argparse.Namespace, binaries: Binaries, keep: Path | None
) -> None:
    """A fresh cluster tier for one side: every scenario, then the idle window; logs kept under `keep`."""
    contender.all_logs = []
    with tempfile.TemporaryDirectory(prefix="tj-bench-kf-") as folder:
        root = Path(folder)
        plane = AuditedControlPlane(root, binaries, scheduler_qps=args.scheduler_qps)
        plane.start()
        run: Run | None = None
        try:
            admin = api_client(plane.kubeconfig)
            install_trainingjob_crd(admin)
            kubeflow.install_crd(admin, args.kubeflow_folder)
            add_nodes(client.CoreV1Api(admin), results.nodes)
            audit = AuditLog(plane.audit_log, admin, plane.user_kubeconfig(MARKER_USER, ("system:masters",)))
            run = Run(contender, plane, admin, audit, args.deadline)
            measure_side(run, results, args, root)
            results.peak_reset = results.peak_reset and run.peak_reset
        except BaseException:
            for log in contender.logs():
                print(f"--- {log.name} ends:\n{tail(log)}", file=sys.stderr)
            raise
        finally:
            contender.stop()
            if run is not None:
                run.close()
            plane.stop()
            if keep is not None:
                target = keep / f"{len(results.orders)}-{contender.key}"
                target.mkdir(parents=True, exist_ok=True)
                copies = [(log, f"{log.parent.name}-{log.name}") for log in contender.logs()]
                for path, name in [*copies, (plane.audit_log, "audit.log")]:
                    with contextlib.suppress(OSError):
                        shutil.copy(path, target / name)


def measure_side(run: Run, results: Results, args: argparse.Namespace, root: Path) -> None:
    contender = run.contender
    contender.start(run.plane, root)
    results.describe[contender.key] = contender.describe()
    warm_up(run)
    for scenario in results.scenarios:
        measurement = measure(run, scenario)
        results.measurements.setdefault((scenario.key, contender.key), []).append(measurement)
        print(f"  {contender.key:22} {scenario.title}: {summary(measurement)}", flush=True)
    if args.idle_jobs:
        if contender.restart_for_idle:
            contender.stop()
            contender.start(run.plane, root, idle=True)
            warm_up(run)
        idle = measure_idle(run, args.idle_jobs, args.idle_ranks, args.idle_window)
        results.idle.setdefault(contender.key, []).append(idle)
        print(f"  {contender.key:22} idle: {idle.reads} reads, {idle.reconciles} reconciles", flush=True)
    contender.stop()


def tail(path: Path, lines: int = 30) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


def scenarios_from(args: argparse.Namespace) -> list[Scenario]:
    def scaled(value: int | None, default: int, floor: int) -> int:
        return value if value is not None else max(floor, round(default * args.scale))

    big = scaled(args.big_ranks, 1024, 2)
    jobs, job_ranks = scaled(args.jobs, 1000, 1), args.job_ranks or 8
    failure = scaled(args.failure_ranks, 256, 2)
    every = [
        Scenario("big", f"1 job x {big:,} ranks: create -> all pods Running", 1, big),
        Scenario(
            "many",
            f"{jobs:,} jobs x {job_ranks} ranks: create -> all {jobs * job_ranks:,} pods Running",
            jobs,
            job_ranks,
        ),
        Scenario("failure", f"rank failure in a {failure}-rank job -> all ranks Running again", 1, failure, True),
    ]
    return [s for s in every if s.key in args.scenarios.split(",")]


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the default sizes (1024, 1000 jobs, 256)")
    parser.add_argument("--big-ranks", type=int, help="ranks of scenario 1's one job (default 1024)")
    parser.add_argument("--jobs", type=int, help="jobs of scenario 2 (default 1000)")
    parser.add_argument("--job-ranks", type=int, help="ranks of each job of scenario 2 (default 8)")
    parser.add_argument("--failure-ranks", type=int, help="ranks of scenario 3's job (default 256)")
    parser.add_argument("--idle-jobs", type=int, default=20, help="jobs of the reads-per-reconcile window; 0: skip")
    parser.add_argument("--idle-ranks", type=int, default=2)
    parser.add_argument("--idle-window", type=float, default=20.0)
    parser.add_argument("--threads", type=int, default=8, help="our TJ_OPERATOR_WORKERS and Kubeflow's threads")
    parser.add_argument("--sides", default=",".join(SIDES), help=f"a subset of {','.join(SIDES)}")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help=f"a subset of {','.join(SCENARIOS)}")
    parser.add_argument("--scheduler-qps", type=int, default=1000, help="kube-scheduler's --kube-api-qps (0: its own)")
    parser.add_argument("--deadline", type=float, default=1800.0, help="seconds any one wait may take")
    parser.add_argument("--keep-logs", type=Path, help="copy the operators' logs and the audit logs here")
    parser.add_argument("--write-doc", action="store_true", help=f"regenerate {DOC.relative_to(REPO)}")
    args = parser.parse_args(argv)
    for what, names, known in (("sides", args.sides, SIDES), ("scenarios", args.scenarios, SCENARIOS)):
        unknown = set(names.split(",")) - set(known)
        if unknown:
            parser.error(f"unknown {what}: {', '.join(sorted(unknown))}")
    return args


def main() -> None:
    # SIGTERM (a timeout, a Ctrl-C'd make) unwinds like an exception, so every process started is stopped.
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    argv = sys.argv[1:]
    args = parse(argv)
    args.kubeflow_folder = kubeflow.build()
    binaries = Binaries.from_environment()
    sides = [s for s in SIDES if s in args.sides.split(",")]
    results = Results(scenarios_from(args), sides)
    most = max(s.jobs * s.ranks for s in results.scenarios)
    results.nodes = max(2, math.ceil(most * 1.15 / PODS_PER_NODE))
    contenders: dict[str, Contender] = {
        OURS: Ours(args.threads),
        KF_UNTHROTTLED: Kubeflow(KF_UNTHROTTLED, unthrottled=True, threads=args.threads, folder=args.kubeflow_folder),
        KF_DEFAULT: Kubeflow(KF_DEFAULT, unthrottled=False, threads=args.threads, folder=args.kubeflow_folder),
    }
    for repetition in range(args.repetitions):
        order = sides[repetition % len(sides) :] + sides[: repetition % len(sides)]
        results.orders.append(order)
        print(f"repetition {repetition + 1}/{args.repetitions}: {', '.join(order)}", flush=True)
        for side in order:
            side_run(contenders[side], results, args, binaries, args.keep_logs)
    print("\n".join(["", *report(results, args)]))
    if args.write_doc:
        write_doc(results, args, argv)


if __name__ == "__main__":
    main()
