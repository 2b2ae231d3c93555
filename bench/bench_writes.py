"""Benchmark: the apiserver writes our operator makes on a gang's way up, against a baseline checkout of the operator
(e.g. the commit before a change), on the cluster tier, one side at a time in a fresh audited cluster, alternating.

Run: python bench/bench_writes.py --baseline DIR [--big-ranks N] [--jobs N --job-ranks N] [--repetitions N]
(needs TJ_CONTROLPLANE_BIN, as `make bench` sets; DIR is a checkout of the operator to compare with, e.g. made by
`git worktree add --detach DIR HEAD~1`). Scenarios as bench_kubeflow.py's first two (by default 1 job x 1,024
ranks, and 250 jobs x 8 ranks): jobs created -> every pod Running and every status Running. Counts the writes of
the operator's own user from the apiserver's audit log (create, update, patch, delete) in that window: all of
them, and those to pods alone; prints them per pod, side by side, and the ratio (this checkout / baseline); then
the rest of what bench_kubeflow measures (time, operator CPU and peak RSS, control-plane CPU, status lags) the same
way.
"""

import argparse
import math
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "operator")]

from bench import kubeflow_plane as audited  # noqa: E402
from bench.kubeflow_measure import Measurement, Run, Scenario, measure, warm_up  # noqa: E402
from bench.kubeflow_report import METRICS, fmt, median, ratio, summary  # noqa: E402
from bench.kubeflow_sides import Ours  # noqa: E402
from kubernetes import client  # noqa: E402
from testbed.controlplane import Binaries  # noqa: E402
from testbed.crds import install_crd  # noqa: E402

THIS, BASELINE = "this checkout", "baseline"


class Checkout(Ours):
    """Our operator, run from the sources of `root` (this checkout's testbed starts it)."""

    def __init__(self, workers: int, root: Path) -> None:
        super().__init__(workers)
        self.settings["PYTHONPATH"] = ":".join(str(root / p) for p in ("operator", "api", "trainer-image", "."))


def pod_writes(requests: Counter[str]) -> int:
    return audited.writes(Counter({k: n for k, n in requests.items() if k.split(" ")[1] == "pods"}))


def side(contender: Checkout, scenarios: list[Scenario], binaries: Binaries, deadline: float) -> list[Measurement]:
    """A fresh cluster tier: each scenario measured (the requests of the operator's user among the rest), jobs
    created -> all Running."""
    with tempfile.TemporaryDirectory(prefix="tj-bench-writes-") as folder:
        plane = audited.AuditedControlPlane(Path(folder), binaries, scheduler_qps=1000)
        plane.start()
        run: Run | None = None
        try:
            admin = audited.api_client(plane.kubeconfig)
            install_crd(admin)
            most = max(s.jobs * s.ranks for s in scenarios)
            audited.add_nodes(client.CoreV1Api(admin), max(2, math.ceil(most * 1.15 / audited.PODS_PER_NODE)))
            audit = audited.AuditLog(
                plane.audit_log, admin, plane.user_kubeconfig(audited.MARKER_USER, ("system:masters",))
            )
            run = Run(contender, plane, admin, audit, deadline)
            contender.start(plane, Path(folder))
            warm_up(run)
            return [measure(run, scenario) for scenario in scenarios]
        finally:
            contender.stop()
            if run is not None:
                run.close()
            plane.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, required=True, help="a checkout of the operator to compare with")
    parser.add_argument("--big-ranks", type=int, default=1024)
    parser.add_argument("--jobs", type=int, default=250)
    parser.add_argument("--job-ranks", type=int, default=8)
    parser.add_argument("--repetitions", type=int, default=1)
    parser.add_argument("--threads", type=int, default=8, help="TJ_OPERATOR_WORKERS")
    parser.add_argument("--deadline", type=float, default=1800.0, help="seconds any one wait may take")
    args = parser.parse_args()
    scenarios = [
        Scenario("big", f"1 job x {args.big_ranks:,} ranks", 1, args.big_ranks),
        Scenario("many", f"{args.jobs:,} jobs x {args.job_ranks} ranks", args.jobs, args.job_ranks),
    ]
    contenders = {THIS: Checkout(args.threads, REPO), BASELINE: Checkout(args.threads, args.baseline.resolve())}
    measured_all: dict[tuple[str, str], list[Measurement]] = {}
    binaries = Binaries.from_environment()
    for repetition in range(args.repetitions):
        order = [BASELINE, THIS] if repetition % 2 == 0 else [THIS, BASELINE]
        for name in order:
            measured = side(contenders[name], scenarios, binaries, args.deadline)
            for scenario, measurement in zip(scenarios, measured, strict=True):
                measured_all.setdefault((scenario.key, name), []).append(measurement)
                print(f"  {name:14} {scenario.title}: {summary(measurement)}", flush=True)
    counted = {key: [m.requests for m in ms] for key, ms in measured_all.items()}
    print("\nwrites on the way up, per pod (median of the repetitions): all of the operator's | to pods alone")
    for scenario in scenarios:
        pods = scenario.jobs * scenario.ranks
        per = {
            name: (
                sorted(audited.writes(r) / pods for r in counted[(scenario.key, name)])[args.repetitions // 2],
                sorted(pod_writes(r) / pods for r in counted[(scenario.key, name)])[args.repetitions // 2],
            )
            for name in (BASELINE, THIS)
        }
        (b_all, b_pods), (t_all, t_pods) = per[BASELINE], per[THIS]
        print(
            f"  {scenario.title}: baseline {b_all:.3f} | {b_pods:.3f}; this checkout {t_all:.3f} | {t_pods:.3f}; "
            f"ratio {t_all / b_all:.2f}x | {t_pods / b_pods:.2f}x"
        )
    print("\nthe rest, median of the repetitions: baseline | this checkout | ratio")
    for scenario in scenarios:
        print(f"  {scenario.title}:")
        for label, value, digits in METRICS:
            b, t = (median([value(m) for m in measured_all[(scenario.key, n)]]) for n in (BASELINE, THIS))
            print(f"    {label}: {fmt(b, digits)} | {fmt(t, digits)} | {ratio(t, b)}")


if __name__ == "__main__":
    main()
