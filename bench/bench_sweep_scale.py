"""One sweep reconcile (reconcile_sweep through the operator's own stores: the sweep and its trials' jobs as the
informers keep them, packed) at 500, 2,000 and 10,000 trials in all (maxTrials): all but the last started, 10 of
them running halfway, the others succeeded, and the last drawn by TPE in the reconcile measured; every trial with a
16-point curve, median pruning on: wall time, CPU time and the
peak of Python allocations during the reconcile (tracemalloc), each size in a process of its own. The baseline, in
the same run: this code at 500 trials, and with --old DIR (a checkout of an earlier commit: `git worktree add DIR
COMMIT`) that code at 500 trials (before summaries a status held at most 500). Goal: under 1 s and 100 MB at
10,000."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

RUNNING, ROUNDS, TOTAL_STEPS = 10, 5, 1600
T0 = datetime(2026, 1, 1, tzinfo=UTC)
Manifest = dict[str, Any]


def _spec(total: int, rule: str) -> Manifest:
    template = {"spec": {"mode": "DDP", "workers": {"replicas": 2}, "trainer": {"steps": TOTAL_STEPS}}}
    parameters = [
        {"name": "lr", "path": "trainer.learningRate", "type": "Float", "min": 0.001, "max": 1.0, "log": True},
        {"name": "batch", "path": "trainer.batchSize", "type": "Categorical", "values": [16, 32, 64]},
    ]
    return {
        "template": template,
        "parameters": parameters,
        "objective": {"metric": "accuracy", "goal": "Maximize"},
        "maxTrials": total,
        "maxFailedTrials": total,
        "parallelism": RUNNING + 1,
        "earlyStopping": {"algorithm": "Median", "startupTrials": 5} if rule == "Median" else {"algorithm": rule},
    }


def _evaluations(quality: float, points: int, total_steps: int) -> list[Manifest]:
    """Evaluations at each sixteenth of the run, as a trial's curve keeps them."""
    steps = [total_steps * k // 16 for k in range(1, 17)]
    return [
        {"step": s, "time": T0.isoformat(), "metrics": {"accuracy": round(quality * (1 - 1 / (2 + i)), 6)}}
        for i, s in enumerate(steps[:points])
    ]


def _world(total: int, varied: bool, rule: str) -> tuple[Manifest, list[Manifest]]:
    """The sweep (its status as this code keeps it) and its trials' jobs: all but the last of its `total` trials
    started, RUNNING of them running halfway and the others succeeded; the last one is drawn by the reconcile.
    `varied`: each trial runs its own number of steps (as when steps is a parameter), so no two curves share a
    step."""
    import random  # noqa: PLC0415

    from trainingjob.model import API_VERSION  # noqa: PLC0415
    from trainingjob.model.sweep import SWEEP_KIND, TrainingSweep  # noqa: PLC0415
    from trainingjob.model.sweep_status import ObjectivePoint, Trial, TrialPhase  # noqa: PLC0415
    from trainingjob.sweep.trial_jobs import trial_manifest  # noqa: PLC0415

    rng = random.Random(total)
    metadata = {"name": "sweep", "namespace": "ns", "uid": "sweep-uid", "generation": 1, "resourceVersion": "1"}
    manifest = {"apiVersion": API_VERSION, "kind": SWEEP_KIND, "metadata": metadata, "spec": _spec(total, rule)}
    sweep = TrainingSweep.from_manifest(manifest)
    trials, jobs = [], []
    for number in range(total - 1):
        running = number >= total - 1 - RUNNING
        quality, points = rng.random(), 8 if running else 16
        steps = rng.randrange(TOTAL_STEPS, 2 * TOTAL_STEPS) if varied else TOTAL_STEPS
        evaluations = _evaluations(quality, points, steps)
        curve = [ObjectivePoint(step=e["step"], value=e["metrics"]["accuracy"]) for e in evaluations]
        trial = Trial(
            number=number,
            job_name=f"sweep-{number}",
            parameters={"lr": 10 ** rng.uniform(-3, 0), "batch": rng.choice([16, 32, 64])},
            phase=TrialPhase.RUNNING if running else TrialPhase.SUCCEEDED,
            objective=curve[-1].value,
            objective_step=curve[-1].step,
            curve=curve,
            total_steps=steps,
            start_time=T0,
            completion_time=None if running else T0,
        )
        trials.append(trial)
        job = trial_manifest(sweep, trial)
        job["metadata"].update(uid=f"job-{number}", resourceVersion=str(number + 2), creationTimestamp=T0.isoformat())
        progress = {"step": curve[-1].step, "totalSteps": steps, "metrics": evaluations[-1]["metrics"]}
        job["status"] = {
            "phase": "Running" if running else "Succeeded",
            "history": {"evaluations": evaluations},
            "progress": {**progress, "metricsStep": curve[-1].step},
        }
        if not running:
            job["status"]["result"] = {"metrics": evaluations[-1]["metrics"], "metricsStep": steps}
        jobs.append(job)
    manifest["status"] = _status(sweep.spec, trials)
    return manifest, jobs


def _status(spec: Any, trials: list[Any]) -> Manifest:
    """The status as this code holds it: with summaries, compacted (with the learners' records of the summarised
    trials, where the code keeps them); before them, every trial listed."""
    import inspect  # noqa: PLC0415

    try:
        from trainingjob.sweep.summary import compacted  # noqa: PLC0415
    except ImportError:
        listed, summary = trials, None
    else:
        top = max((t for t in trials if t.phase.value == "Succeeded"), key=lambda t: t.objective)
        call: Any = compacted  # this code's takes the spec first; an older checkout's does not
        takes_spec = "spec" in inspect.signature(compacted).parameters
        listed, summary = call(*([spec] if takes_spec else []), trials, None, {top.number})
    status: Manifest = {"phase": "Running", "trials": [t.model_dump(mode="json", by_alias=True) for t in listed]}
    if summary is not None:
        status["summarised"] = summary.model_dump(mode="json", by_alias=True, exclude_none=True)
    return status


class Writes:
    """The apiserver's side of the writes: answered, not applied (each round starts from the same stores)."""

    def read_sweep(self, namespace: str, name: str) -> Manifest | None:
        raise AssertionError("read from the stores")

    def list_trial_jobs(self, namespace: str, sweep: str) -> list[Manifest]:
        raise AssertionError("read from the stores")

    def write_sweep_status(self, namespace: str, name: str, resource_version: str, patch: Manifest) -> str:
        return str(int(resource_version) + 1)

    def create_job(self, namespace: str, manifest: Manifest) -> str | None:
        return None

    def suspend_job(self, namespace: str, name: str) -> None:
        return None

    def delete_job(self, namespace: str, name: str, uid: str) -> None:
        return None


def side(total: int, varied: bool, rule: str) -> Manifest:
    """Measure here (the PYTHONPATH's code): ROUNDS timed reconciles, then one under tracemalloc."""
    from trainingjob.reconcile.sweep import reconcile_sweep  # noqa: PLC0415
    from trainingjob.runtime.cached import CachedSweepCluster  # noqa: PLC0415
    from trainingjob.runtime.memory import Stores  # noqa: PLC0415

    sweep, jobs = _world(total, varied, rule)
    stores = Stores()
    stores.sweeps.apply("ADDED", sweep)
    for job in jobs:
        stores.trials.apply("ADDED", job)
    del jobs
    cluster = CachedSweepCluster(Writes(), stores)
    now = T0 + timedelta(minutes=5)
    walls, cpus = [], []
    reconcile_sweep(cluster, "ns", "sweep", now=now)  # warm: Optuna's imports, first-call caches
    for _ in range(ROUNDS):
        wall, cpu = time.perf_counter(), time.process_time()
        reconcile_sweep(cluster, "ns", "sweep", now=now)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    tracemalloc.start()
    outcome = reconcile_sweep(cluster, "ns", "sweep", now=now)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    status = sweep.get("status") or {}
    after = outcome.after.model_dump(mode="json", by_alias=True, exclude_none=True) if outcome.after else {}
    return {
        "total": total,
        "listed": len(status.get("trials", [])),
        "wall_s": statistics.median(walls),
        "cpu_s": statistics.median(cpus),
        "peak_mb": peak / 1e6,
        "status_kb": len(json.dumps(after, separators=(",", ":"))) / 1024,
    }


def _run(tree: Path, total: int, varied: bool, rule: str) -> Manifest:
    env = {**os.environ, "PYTHONPATH": f"{tree / 'operator'}"}
    command = [sys.executable, __file__, "--side", str(total), "--rule", rule, *(["--varied"] if varied else [])]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    result: Manifest = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--old", type=Path, help="a checkout of an earlier commit: its code at 500 trials, beside")
    parser.add_argument("--sizes", type=int, nargs="*", default=[500, 2_000, 10_000])
    parser.add_argument("--varied", action="store_true", help="each trial its own number of steps")
    parser.add_argument("--rule", choices=["Median", "SuccessiveHalving"], default="Median")
    args = parser.parse_args()
    if args.side:
        print(json.dumps(side(args.side, args.varied, args.rule)))
        return
    here = Path(__file__).resolve().parent.parent
    rows = [("this code", _run(here, total, args.varied, args.rule)) for total in args.sizes]
    if args.old:
        rows.insert(0, ("old code", _run(args.old.resolve(), 500, args.varied, args.rule)))
    base = next(r for name, r in rows if name == "this code" and r["total"] == min(args.sizes))
    curves = "each trial's own steps" if args.varied else "shared steps"
    print(f"one sweep reconcile, {RUNNING} running, {curves}, {args.rule}, median of {ROUNDS}; ratios against 500")
    head = ("code", "trials", "listed", "wall s", "cpu s", "peak MB", "status KiB", "cpu ratio", "peak ratio")
    print("  {:<10} {:>7} {:>7} {:>7} {:>6} {:>8} {:>10} {:>9} {:>10}".format(*head))
    for name, r in rows:
        cpu, peak = r["cpu_s"] / base["cpu_s"], r["peak_mb"] / base["peak_mb"]
        print(
            f"  {name:<10} {r['total']:>7} {r['listed']:>7} {r['wall_s']:>7.3f} {r['cpu_s']:>6.3f}"
            f" {r['peak_mb']:>8.1f} {r['status_kb']:>10.0f} {cpu:>8.2f}x {peak:>9.2f}x"
        )


if __name__ == "__main__":
    main()
