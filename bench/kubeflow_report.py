"""The report of bench/bench_kubeflow.py: a line per measurement while it runs, then the tables of medians and
ratios, and docs/performance.md (results, settings, method, machine) for the scenarios that ran."""

import argparse
import datetime
import importlib.metadata
import os
import platform
import shlex
import statistics
import subprocess
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from bench.kubeflow import REPO
from bench.kubeflow_measure import Measurement, Results, Scenario
from bench.kubeflow_plane import CREATE_THREADS, KUBEFLOW_USER, OURS_USER, POD_CIDR, PODS_PER_NODE
from bench.kubeflow_sides import OURS

DOC = REPO / "docs" / "performance.md"


def summary(m: Measurement) -> str:
    lag50, lag99 = m.lag(0.5), m.lag(0.99)
    lags = f"lag p50 {fmt(lag50, 3)} p99 {fmt(lag99, 3)} s" + (f" ({m.unchanged} unchanged)" if m.unchanged else "")
    top = ", ".join(f"{n} {k}" for k, n in m.requests.most_common(4))
    plane = ", ".join(f"{name} {seconds:.1f}" for name, seconds in sorted(m.control_plane.items()))
    return (
        f"{m.seconds:.2f} s pods, {fmt(m.status_seconds)} s statuses, CPU {m.cpu_seconds:.2f} s "
        f"(control plane {fmt(m.control_plane_seconds, 1)} s: {plane}), "
        f"RSS {m.peak_rss_mib:.0f} MiB, {m.reads} reads, {m.writes} writes, {lags}; {top}"
    )


def fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def ratio(ours: float | None, theirs: float | None) -> str:
    if ours is None or theirs is None or ours <= 0 or theirs <= 0:
        return "n/a"
    return f"{ours / theirs:.2f}"


Metric = tuple[str, Callable[[Measurement], float | None], int]
METRICS: tuple[Metric, ...] = (
    ("time to all pods Running (s)", lambda m: m.seconds, 2),
    ("time to the last status turning Running (s)", lambda m: m.status_seconds, 2),
    ("operator CPU (s)", lambda m: m.cpu_seconds, 2),
    ("operator peak RSS (MiB)", lambda m: m.peak_rss_mib, 0),
    ("control plane CPU (s): etcd, apiserver, scheduler, controllers, kwok", lambda m: m.control_plane_seconds, 1),
    ("apiserver reads (get/list/watch)", lambda m: m.reads, 0),
    ("apiserver writes (create/update/patch/delete)", lambda m: m.writes, 0),
    ("status lag p50 (s)", lambda m: m.lag(0.5), 3),
    ("status lag p99 (s)", lambda m: m.lag(0.99), 3),
)


def scenario_table(results: Results, scenario: Scenario) -> list[str]:
    sides = results.sides
    header = ["metric (median)", *sides]
    header += [f"ours / {s}" for s in sides if s != OURS] if OURS in sides else []
    rows = [header, ["---"] + ["---:"] * (len(header) - 1)]
    for label, value, digits in METRICS:
        medians = {s: median([value(m) for m in results.measurements.get((scenario.key, s), [])]) for s in sides}
        row = [label, *(fmt(medians[s], digits) for s in sides)]
        if OURS in sides:
            row += [ratio(medians[OURS], medians[s]) for s in sides if s != OURS]
        rows.append(row)
    return ["| " + " | ".join(row) + " |" for row in rows]


def top_requests(results: Results, scenario: Scenario, count: int = 6) -> list[str]:
    lines = []
    for side in results.sides:
        runs = results.measurements.get((scenario.key, side), [])
        keys = {k for m in runs for k in m.requests}
        medians = {k: statistics.median([m.requests.get(k, 0) for m in runs]) for k in keys}
        top = sorted(medians.items(), key=lambda item: -item[1])[:count]
        lines.append(f"- {side}: " + ", ".join(f"{n:,.0f} {k}" for k, n in top))
    return lines


def runs_line(results: Results, scenario: Scenario) -> str:
    parts = []
    for side in results.sides:
        values = [m.seconds for m in results.measurements.get((scenario.key, side), [])]
        parts.append(f"{side} " + ", ".join(f"{v:.2f}" for v in values))
    return "time to all pods Running, each run (s): " + "; ".join(parts)


def idle_lines(results: Results, args: argparse.Namespace) -> list[str]:
    if not results.idle:
        return []
    lines = [
        f"apiserver reads (get/list, not watch) per reconcile of an unchanged job: {args.idle_jobs} jobs x "
        f"{args.idle_ranks} ranks Running, a {args.idle_window:.0f} s window (median over the runs; goal: 0)",
        "",
    ]
    for side in results.sides:
        runs = results.idle.get(side, [])
        if not runs:
            continue
        reads_median = statistics.median([i.reads for i in runs])
        reconciles = statistics.median([i.reconciles for i in runs])
        per = f"{reads_median / reconciles:.3f} reads per reconcile" if reconciles else "no reconciles"
        setting = " (TJ_OPERATOR_RESYNC_SECONDS=1)" if side == OURS else " (no periodic resync)"
        keys = Counter[str]()
        for idle in runs:
            keys.update({k: n for k, n in idle.requests.items() if k.split(" ")[0] in ("get", "list")})
        what = ", ".join(f"{n / len(runs):,.1f} {k}" for k, n in keys.most_common(4)) or "none"
        lines.append(f"- {side}{setting}: {reads_median:,.0f} reads, {reconciles:,.0f} reconciles: {per} ({what})")
    return lines


def report(results: Results, args: argparse.Namespace) -> list[str]:
    lines: list[str] = []
    for scenario in results.scenarios:
        lines += [f"### {scenario.title}", "", *scenario_table(results, scenario), ""]
        lines += ["Requests that dominate (median count, 'verb resource'):", "", *top_requests(results, scenario)]
        lines += ["", runs_line(results, scenario), ""]
        unchanged = {s: [m.unchanged for m in results.measurements.get((scenario.key, s), [])] for s in results.sides}
        if any(sum(counts) for counts in unchanged.values()):
            said = "; ".join(f"{s} {', '.join(map(str, n))}" for s, n in unchanged.items() if sum(n))
            lines += [f"Jobs whose status said Running throughout, so no lag was measured (each run): {said}", ""]
    lines += idle_lines(results, args)
    return lines


def machine() -> list[str]:
    meminfo = Path("/proc/meminfo").read_text().splitlines()
    memory = next((int(line.split()[1]) for line in meminfo if line.startswith("MemTotal:")), 0)
    models = [
        line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines() if "model name" in line
    ]
    return [
        f"- nproc: {len(os.sched_getaffinity(0))}",
        f"- memory: {memory / 2**20:.1f} GiB",
        f"- CPU: {models[0] if models else platform.processor() or 'unknown'}",
        f"- kernel: {platform.system()} {platform.release()}",
        f"- Python {platform.python_version()}, kopf {importlib.metadata.version('kopf')}",
    ]


def our_revision() -> str:
    def git(*argv: str) -> str:
        done = subprocess.run(
            ["git", "--no-optional-locks", *argv], check=False, cwd=REPO, capture_output=True, text=True
        )
        return done.stdout.strip()

    changed = git("status", "--porcelain", "--", "operator")
    return git("rev-parse", "--short", "HEAD") + (" with uncommitted changes in operator/" if changed else "")


def method(results: Results, args: argparse.Namespace) -> list[str]:
    scenarios = {s.key: s for s in results.scenarios}
    failure = next((s for s in results.scenarios if s.failure), None)
    plane = Path(os.environ.get("TJ_CONTROLPLANE_BIN", "?")).name
    lines = [
        f"- Cluster tier ({plane}): etcd, kube-apiserver (priority and fairness off, as in the tests), "
        f"kube-scheduler (client limit raised to --kube-api-qps={args.scheduler_qps} so that binding pods is not "
        "what both sides wait for), kube-controller-manager, kwok giving pods addresses in "
        f"{POD_CIDR} (outside loopback, so that the Endpoints of both sides' Services are written, not refused); "
        f"{results.nodes} kwok nodes of {PODS_PER_NODE} pods plus the tier's two of 110.",
        "- One fresh cluster tier per side and repetition; one operator runs at a time. The order of the sides "
        "rotates every repetition: " + "; ".join(", ".join(order) for order in results.orders) + ".",
        "- Every scenario runs in a fresh namespace after a warm-up job (1 x 2 ranks, not measured); the namespace "
        "is deleted and waited out (pods gone) before the next scenario.",
        "- Each operator runs out of cluster as a process on this machine, with a client certificate of its own "
        f"(user `{OURS_USER}` or `{KUBEFLOW_USER}`, group system:masters).",
        "- Time: from the first create request" + (" (or the failure)" if failure is not None else "") + " until a "
        f"pod watch sees the last pod Running; jobs are created from a thread pool of {CREATE_THREADS}. Job "
        "statuses: a watch on the jobs; ours says Running with `status.phase: Running`, Kubeflow's with a "
        "condition Running=True.",
        "- Status lag, per job: the watch's arrival time of the status turning Running minus the arrival time of "
        "the job's last running pod turning Running (signed; p50 and p99 over the jobs of a run). Kubeflow sets "
        "Running once its Master pod runs (not all workers), so its lag can be negative; it is positive when its "
        "work queue or client rate limit delays the status write.",
        "- CPU: user+system seconds of the operator process over the window (/proc/PID/stat); peak RSS: VmHWM "
        + ("reset at the start of each scenario (clear_refs 5)." if results.peak_reset else "since its start."),
        "- Control plane CPU: the same, summed over the cluster tier's servers (etcd, kube-apiserver, "
        "kube-scheduler, kube-controller-manager, kwok): what the side's way of writing pods costs the cluster. "
        "The tier shares the machine's cores with the operator, so on a small machine this bounds the time.",
        "- Requests: the apiserver's audit log (policy: level Metadata for the two operators' users, stage "
        "RequestReceived omitted), each request counted once by auditID, received inside the window (the action "
        "until every pod and every status is Running). Reads: get, list, watch; writes: create, update, patch, "
        "delete, deletecollection (Events included).",
    ]
    if failure is not None:
        lines.append(
            f"- Failure ({failure.ranks} ranks): once every rank and the status are Running, rank 1's pod is marked "
            "Failed with exit code 1 through the pods/status subresource (as a kubelet would); the clock stops when "
            "every rank is Running again. The semantics differ: ours restarts the whole gang as a new attempt (its "
            "backoff base set to 0.1 s, default 10 s), Kubeflow (restartPolicy OnFailure) deletes and recreates "
            "the failed pod only."
        )
    if "many" in scenarios:
        lines.append(
            "- The jobs of both sides have the same number of pods; Kubeflow's pods request 100m CPU and 128Mi, "
            "ours none; Kubeflow also creates one headless Service per pod, ours one per job (and a NetworkPolicy)."
        )
    return lines


def write_doc(results: Results, args: argparse.Namespace, argv: list[str]) -> None:
    shown = [a for i, a in enumerate(argv) if not (a.startswith("--keep-logs") or argv[i - 1 : i] == ["--keep-logs"])]
    command = shlex.join(["python", "bench/bench_kubeflow.py", *shown])
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    text = [
        "<!-- Generated by bench/bench_kubeflow.py --write-doc (make bench-kubeflow): do not edit by hand. -->",
        "# Performance: our operator against Kubeflow's training-operator",
        "",
        f"Generated by the benchmark on {when} with `{command}` (`make bench-kubeflow` runs it at full size and "
        f"regenerates this page). {args.repetitions} repetition(s); every figure is a median over them.",
        "",
        "## Results",
        "",
        *report(results, args),
        "",
        "## Settings",
        "",
        *(f"- {side}: {results.describe.get(side, '?')}" for side in results.sides),
        f"- Our operator at revision {our_revision()}. Kubeflow is built from the Go module proxy by "
        "scripts/build-kubeflow.sh and runs out of cluster as bench/kubeflow.py describes (PyTorchJob scheme only, "
        "no webhook in front of it, no gang scheduler).",
        "- Equal concurrency: ours reconciles 8 jobs at a time (TJ_OPERATOR_WORKERS), Kubeflow runs 8 controller "
        "threads. Log levels: ours INFO (its default); Kubeflow info (--zap-log-level=info; its per-reconcile "
        "logrus lines print at info either way).",
        "",
        "## Method",
        "",
        *method(results, args),
        "",
        "## Machine",
        "",
        *machine(),
        "",
    ]
    DOC.write_text("\n".join(text))
    print(f"wrote {DOC.relative_to(REPO)}")
