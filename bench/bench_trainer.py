"""Benchmark: our DDP trainer vs a bare torchrun DDP script (steps/s), and async vs sync checkpoint stalls.

Run: python bench/bench_trainer.py [--repetitions N]. Both sides train the same synthetic model, batch and
data on 2 local ranks (gloo, one thread each); repetitions alternate which side goes first. Prints ratios.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from testbed.processes import free_port  # noqa: E402
from testbed.trainer_procs import base_env, read_json  # noqa: E402

STEPS, BATCH, LEARNING_RATE, SEED, NPROC = 200, 64, 0.05, 0, 2
TIMEOUT = 300


def run_ours(workdir: Path, checkpoint_every: int = 0, asynchronous: bool = False) -> dict[str, Any]:
    """One run of `python -m trainer` with two local ranks; returns rank 0's final progress."""
    config = {"workload": "synthetic", "steps": STEPS, "batchSize": BATCH, "learningRate": LEARNING_RATE}
    config |= {"momentum": 0.9, "seed": SEED, "asyncCheckpoint": asynchronous}
    progress = workdir / f"progress-{free_port()}.json"
    env = {
        "MASTER_PORT": str(free_port()),
        "TJ_NPROC_PER_POD": str(NPROC),
        "TJ_TRAINER_CONFIG": json.dumps(config),
        "TJ_PROGRESS_FILE": str(progress),
    }
    if checkpoint_every:
        directory = tempfile.mkdtemp(dir=workdir)
        env |= {"TJ_CHECKPOINT_DIR": directory, "TJ_CHECKPOINT_EVERY_STEPS": str(checkpoint_every)}
    command = [sys.executable, "-m", "trainer"]
    subprocess.run(command, env=base_env(env), check=True, capture_output=True, timeout=TIMEOUT, cwd=REPO)
    result = read_json(progress)
    assert result is not None
    return result


def run_bare() -> dict[str, Any]:
    """One run of the bare script under torchrun, configured only through the PET_* variables."""
    env = {
        "PET_NNODES": "1",
        "PET_NPROC_PER_NODE": str(NPROC),
        "PET_NODE_RANK": "0",
        "PET_MASTER_ADDR": "127.0.0.1",
        "PET_MASTER_PORT": str(free_port()),
    }
    torchrun = Path(sys.executable).with_name("torchrun")
    script = REPO / "bench" / "trainer_bare_ddp.py"
    command = [str(torchrun), str(script), str(STEPS), str(BATCH), str(LEARNING_RATE), str(SEED)]
    done = subprocess.run(command, env=base_env(env), check=True, capture_output=True, text=True, timeout=TIMEOUT)
    line = [line for line in done.stdout.splitlines() if line.startswith("{")][-1]
    result: dict[str, Any] = json.loads(line)
    return result


def throughput(workdir: Path, repetitions: int) -> None:
    """Steps/s of ours over bare, interleaved; the median step time resists noise from other processes."""
    ratios: dict[str, list[float]] = {"stepsPerSecond": [], "medianStepsPerSecond": []}
    for repetition in range(repetitions):
        if repetition % 2 == 0:
            ours, bare = run_ours(workdir), run_bare()
        else:
            bare, ours = run_bare(), run_ours(workdir)
        for key, values in ratios.items():
            values.append(ours[key] / bare[key])
        print(
            f"  repetition {repetition}: steps/s mean-based ours {ours['stepsPerSecond']:.2f} bare "
            f"{bare['stepsPerSecond']:.2f}; median-step-based ours {ours['medianStepsPerSecond']:.2f} "
            f"bare {bare['medianStepsPerSecond']:.2f}"
        )
    for key, values in ratios.items():
        rounded = [round(value, 3) for value in values]
        print(f"throughput ratio ours/bare ({key}): median {statistics.median(values):.3f}, all {rounded}")
    print("goal: ratio >= 0.97")


def stall(workdir: Path, repetitions: int, every: int) -> None:
    """Mean time the training loop is blocked per checkpoint, synchronous vs asynchronous."""
    per_save: dict[bool, list[float]] = {False: [], True: []}
    for repetition in range(repetitions):
        for asynchronous in (False, True) if repetition % 2 == 0 else (True, False):
            result = run_ours(workdir, checkpoint_every=every, asynchronous=asynchronous)
            per_save[asynchronous].append(result["checkpointStallSeconds"] / result["checkpointSaves"])
    sync, asyn = statistics.median(per_save[False]), statistics.median(per_save[True])
    print(f"checkpoint stall per save: sync {sync * 1000:.1f} ms, async {asyn * 1000:.1f} ms")
    print(f"stall ratio async/sync: {asyn / sync:.3f} (sync/async speed-up {sync / asyn:.1f}x)")


def main() -> None:
    """Run both comparisons and print their ratios."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--checkpoint-every", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        print(f"DDP, synthetic workload, {NPROC} local ranks, batch {BATCH}/rank, {STEPS} steps")
        throughput(Path(workdir), args.repetitions)
        stall(Path(workdir), max(1, args.repetitions - 1), args.checkpoint_every)


if __name__ == "__main__":
    main()
