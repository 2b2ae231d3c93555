"""Benchmark: goodput of an elastic DDP job through an outage, against the same job not elastic, in local mode.

Run: python bench/bench_elastic.py [--minutes 4] [--outage-at 60] [--outage-seconds 150]. The operator's planner and
reconcile run examples/digits-ddp-elastic.yaml (4 workers, minReplicas 2) as `tjctl run --capacity` does: real
trainer processes, and local mode's worker slots as the cluster's room. Both measured runs get the same outage by
the clock (`--capacity 4,2@Ts,4@Us`): at T seconds into the run two of the four slots go (the last two workers are
killed, as with a lost node), at U they come back. The elastic job shrinks to 2 workers after the operator's
resizeWaitSeconds (5 s in local mode) and grows back to 4 at the checkpoint after the slots return; the other job
(no minReplicas) restarts its gang of 4, two of which wait unschedulable until the slots return.

A first run with all 4 slots measures the step time from outside (its metrics log's first and last logged step).
Each measured run has enough steps for --minutes of training at that pace. Goodput from outside: the job's steps
times the clean step time, over the run's wall time (from the job's creation to its end); the global batch is the
same at any size (the trainer accumulates gradients), so a step at 2 workers is the same work as one at 4.

On this machine's 2 cores the CPU, not the world size, bounds a digits step: 2 workers step faster than 4, which no
GPU cluster would show. So each step is made --step-delay seconds longer per full share of work (the trainer's
step-delay hook; a rank of the job shrunk to 2 does twice the micro-batches and waits twice as long), as a model
whose step is bound by its GPU: shrunk to half, the job trains at half the pace.
"""

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "operator"), str(REPO / "api"), str(REPO / "trainer-image"), str(REPO)]

from trainingjob.local.capacity import Capacity  # noqa: E402
from trainingjob.local.cluster import run_local  # noqa: E402
from trainingjob.model import TrainingJobStatus  # noqa: E402
from trainingjob.plan import Event  # noqa: E402

EXAMPLE = REPO / "examples" / "digits-ddp-elastic.yaml"


def job(steps: int, every: int, *, elastic: bool) -> dict[str, Any]:
    manifest = yaml.safe_load(EXAMPLE.read_text())
    spec = manifest["spec"]
    spec["trainer"]["steps"] = steps
    spec["checkpoint"]["everySteps"] = every  # local mode keeps them in the run's folder, whatever the volume
    spec["runPolicy"]["backoffLimit"] = 1000
    if not elastic:
        del spec["workers"]["minReplicas"]
    return dict(manifest)


def step_seconds(workdir: Path) -> float:
    """Seconds per step from the metrics log of a run: first logged train step to last."""
    lines = (json.loads(line) for line in (workdir / "checkpoints" / "metrics.jsonl").read_text().splitlines())
    train = [(line["step"], line["time"]) for line in lines if line["kind"] == "train"]
    (first, began), (last, ended) = train[0], train[-1]
    assert last > first, f"train lines from step {first} to {last}"
    return float(ended - began) / float(last - first)


def measured(manifest: dict[str, Any], workdir: Path, capacity: Capacity) -> tuple[TrainingJobStatus, float, list[str]]:
    """One run to its end: its final status, wall seconds, and the reasons of its Events."""
    events: list[str] = []

    def on_event(event: Event) -> None:
        events.append(event.reason)

    started = time.monotonic()
    status, _ = run_local(manifest, workdir, on_event=on_event, capacity=capacity)
    wall = time.monotonic() - started
    assert status is not None and status.phase.value == "Succeeded", status
    return status, wall, events


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=4.0, help="clean training time of each measured run")
    parser.add_argument("--outage-at", type=int, default=60, help="seconds into the run when two slots go")
    parser.add_argument("--outage-seconds", type=int, default=150, help="how long they stay gone")
    parser.add_argument("--probe-steps", type=int, default=300)
    parser.add_argument("--step-delay", type=float, default=0.05, help="seconds a step waits per full share of work")
    args = parser.parse_args()
    os.environ["TJ_TEST_STEP_DELAY_SECONDS"] = str(args.step_delay)  # local mode's pods inherit it
    with tempfile.TemporaryDirectory() as root:
        probe = Path(root) / "clean"
        every = 200
        measured(job(args.probe_steps, every, elastic=False), probe, Capacity(((0, 4),)))
        step = step_seconds(probe)
        steps = int(args.minutes * 60 / step)
        every = max(int(15 / step), 1)  # a checkpoint about every 15 s of training
        ends = args.outage_at + args.outage_seconds
        outage = Capacity(((0, 4), (args.outage_at, 2), (ends, 4)), seconds=True)
        print(
            f"clean run (4 workers): {1 / step:.1f} steps/s; measured runs: {steps} steps, a checkpoint every "
            f"{every} steps; 2 of 4 worker slots gone from {args.outage_at} s to {ends} s into each run"
        )
        results = {}
        for name, elastic in (("not elastic", False), ("elastic", True)):
            status, wall, events = measured(job(steps, every, elastic=elastic), Path(root) / name, outage)
            outside = steps * step / wall
            results[name] = outside
            reported = status.goodput.ratio if status.goodput else None
            restarts = status.restarts.model_dump(exclude_defaults=True)
            print(
                f"{name}: wall {wall:.0f} s, goodput from outside {outside:.3f}, as the status says {reported}; "
                f"{events.count('Resized')} resizes, attempts {status.attempt}, restarts {restarts}"
            )
            if status.goodput is not None:
                split = status.goodput.model_dump(exclude={"ratio", "time"}, exclude_defaults=True)
                print("  status split: " + ", ".join(f"{part} {seconds}" for part, seconds in split.items()))
    print(f"elastic / not elastic goodput: {results['elastic'] / results['not elastic']:.2f}x")


if __name__ == "__main__":
    main()
