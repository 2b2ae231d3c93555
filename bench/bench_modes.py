"""Benchmark: synchronous all-reduce (DDP) vs asynchronous parameter server, on the same recipe and data.

Run: python bench/bench_modes.py [--steps N] [--repetitions N]. The shapes recipe (examples/image-classification)
trains for the same steps per worker at 1, 2 and 4 workers, once per mode (DDP: one pod with W local ranks;
parameter server: 1 server, W workers, stalenessBound 8). Prints samples/s and test accuracy of each, and the
ratio parameter-server/DDP for both: the trade-off users choose between. Modes alternate which runs first.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from testbed.processes import free_port  # noqa: E402
from testbed.trainer_procs import base_env, ps_env, read_json  # noqa: E402

SHAPES = "examples/image-classification/shapes.py:build"
BATCH, BOUND = 32, 8
TIMEOUT = 600


def config(steps: int) -> str:
    user = {"trainSamples": 4096, "evalSamples": 512, "learningRate": 0.01}
    return json.dumps({"entrypoint": SHAPES, "config": user, "steps": steps, "batchSize": BATCH, "seed": 1})


def start(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as handle:
        return subprocess.Popen(
            [sys.executable, "-m", "trainer"], env=base_env(env), cwd=REPO, stdout=handle, stderr=subprocess.STDOUT
        )


def finish(processes: list[subprocess.Popen[bytes]], progress: Path, started: float, log: Path) -> dict[str, Any]:
    codes = [process.wait(TIMEOUT) for process in processes]
    elapsed = time.perf_counter() - started
    if codes != [0] * len(codes):
        raise SystemExit(f"a run failed with {codes}:\n{log.read_text()[-3000:]}")
    report = read_json(progress)
    assert report is not None
    return {"seconds": elapsed, "accuracy": report["metrics"]["accuracy"]}


def run_ddp(workdir: Path, workers: int, steps: int) -> dict[str, Any]:
    """One pod with `workers` local ranks (the trainer spawns them)."""
    progress, log = workdir / f"ddp-{free_port()}.json", workdir / "ddp.log"
    env = {
        "MASTER_PORT": str(free_port()),
        "TJ_NPROC_PER_POD": str(workers),
        "TJ_TRAINER_CONFIG": config(steps),
        "TJ_PROGRESS_FILE": str(progress),
    }
    started = time.perf_counter()
    return finish([start(env, log)], progress, started, log)


def run_ps(workdir: Path, workers: int, steps: int) -> dict[str, Any]:
    """One parameter server and `workers` worker pods."""
    folder = Path(tempfile.mkdtemp(dir=workdir))
    env = ps_env(folder, shards=1, workers=workers, config=config(steps), wait="60")
    env["TJ_TRAINER_CONFIG"] = json.dumps({**json.loads(env["TJ_TRAINER_CONFIG"]), "stalenessBound": BOUND})
    del env["TJ_CHECKPOINT_DIR"]
    log = folder / "ps.log"
    started = time.perf_counter()
    roles = [("ps", 0)] + [("worker", index) for index in range(workers)]
    processes = [start({**env, "TJ_ROLE": role, "TJ_REPLICA_INDEX": str(index)}, log) for role, index in roles]
    return finish(processes, folder / "progress.json", started, log)


def main() -> None:
    """Both modes at 1, 2 and 4 workers; medians over the repetitions."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--repetitions", type=int, default=1)
    args = parser.parse_args()
    print(f"shapes recipe, batch {BATCH} per worker, {args.steps} steps per worker, stalenessBound {BOUND}")
    with tempfile.TemporaryDirectory() as directory:
        workdir = Path(directory)
        for workers in (1, 2, 4):
            runs: dict[str, list[dict[str, Any]]] = {"ddp": [], "ps": []}
            for repetition in range(args.repetitions):
                order = ("ddp", "ps") if repetition % 2 == 0 else ("ps", "ddp")
                for mode in order:
                    run = run_ddp if mode == "ddp" else run_ps
                    runs[mode].append(run(workdir, workers, args.steps))
            samples = workers * args.steps * BATCH
            rate = {mode: statistics.median(samples / r["seconds"] for r in runs[mode]) for mode in runs}
            accuracy = {mode: statistics.median(r["accuracy"] for r in runs[mode]) for mode in runs}
            print(
                f"{workers} worker(s): DDP {rate['ddp']:.0f} samples/s, accuracy {accuracy['ddp']:.4f}; "
                f"parameter server {rate['ps']:.0f} samples/s, accuracy {accuracy['ps']:.4f}; "
                f"ratio PS/DDP throughput {rate['ps'] / rate['ddp']:.3f}, "
                f"accuracy {accuracy['ps'] / accuracy['ddp']:.3f}"
            )


if __name__ == "__main__":
    main()
