"""Benchmark: checkpoint.everySteps Auto against three fixed intervals, under failures at a known rate.

Run: python bench/bench_pacing.py [--steps N] [--mtbf S] [--save-seconds S] [--fixed 2,6,20]. Each run trains the
same 2-rank digits DDP gang of in-place agents on loopback (every step slowed to a known time, every checkpoint write
slowed by --save-seconds, as a big model on slow storage would be). This script plays the operator: it SIGKILLs rank
1's trainer after gaps drawn from one seeded exponential schedule of mean --mtbf seconds of training (the same gaps
for every run), waits for the gang to fail and orders the next attempt in place, telling it the job's restarts and
running seconds as the operator does (TJ_CHECKPOINT_PACING, with the operator's default bounds and prior, or the
prior --prior gives: an operator that knows its cluster's failure rate sets checkpointPriorMtbfSeconds so). A run
ends when the job has trained all its steps.

Goodput, measured from outside: the time a run without failures or checkpoints takes from its first step to its
last (the baseline, measured in the same invocation), over the time each run takes from its first step to its
last. Printed per run, and Auto's against the best fixed interval.
"""

import argparse
import json
import os
import random
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "operator"), str(REPO / "trainer-image")]

from testbed.trainer_procs import config_json, pods_cleanup, read_json, start_agent_gang, wait_for  # noqa: E402

from trainer.agent_http import request_json  # noqa: E402
from trainingjob.settings import OperatorSettings  # noqa: E402

DEFAULTS = OperatorSettings()
STEP_SECONDS = "0.02"
TIMEOUT = 120.0
NO_PERIODIC = {"TJ_CHECKPOINT_EVERY_STEPS": "1000000000"}  # the baseline: only the final checkpoint


PRIOR = [DEFAULTS.checkpoint_prior_mtbf_seconds]  # --prior


def pacing(auto: bool, failures: int, running: float) -> str:
    """TJ_CHECKPOINT_PACING as the operator writes it, with the prior (--prior, else the operator's) and its bounds."""
    return json.dumps({
        "auto": auto, "failures": failures, "runningSeconds": running,
        "priorSeconds": PRIOR[0],
        "minSeconds": DEFAULTS.checkpoint_min_seconds, "maxSeconds": DEFAULTS.checkpoint_max_seconds,
    })  # fmt: skip


def interval_env(interval: float | None) -> dict[str, str]:
    """Auto (None): no fixed interval; else a fixed everySeconds."""
    if interval is None:
        return {"TJ_CHECKPOINT_EVERY_STEPS": "", "TJ_CHECKPOINT_PACING": pacing(True, 0, 0.0)}
    return {"TJ_CHECKPOINT_EVERY_STEPS": "", "TJ_CHECKPOINT_EVERY_SECONDS": str(interval)}


def progress(directory: Path) -> dict[str, Any]:
    return read_json(directory / "job" / "progress.json") or {}


def first_step_of(directory: Path, attempt: int) -> bool | None:
    """True once `attempt` has made its first step (rank 0's report says so); None before."""
    report = progress(directory)
    return True if report.get("attempt") == attempt and report.get("firstStepTime") else None


def run(directory: Path, steps: int, extra: dict[str, str], gaps: list[float] | None, auto: bool) -> dict[str, Any]:
    """One job to the end: (seconds from the first step to the last, restarts, the last report)."""
    (directory / "logs").mkdir(parents=True)
    config = config_json(workload="digits-mlp", steps=steps, batchSize=32, learningRate=0.1, momentum=0.9, seed=7)
    env = {"TJ_TEST_STEP_DELAY_SECONDS": STEP_SECONDS, **extra}
    with pods_cleanup() as pods:
        gang = start_agent_gang(pods, directory / "logs", directory / "job", 2, config=config, **env)
        wait_for(lambda: first_step_of(directory, 1), TIMEOUT, "the first step")
        started, attempt = time.monotonic(), 1
        for gap in gaps or []:
            if not _fail_after(gang, directory, gap):
                break
            attempt += 1
            order = {"attempt": attempt, "checkpointPacing": pacing(auto, attempt - 1, _running(started))}
            assert request_json(gang.address(0), "POST", "/attempt", body=order, key=gang.key)[0] == 200
            wait_for(lambda: _resumed(directory, attempt), TIMEOUT, "the next attempt's first step")  # noqa: B023
        wait_for(lambda: progress(directory).get("finished"), steps * 1.0, "the last step")
        seconds = time.monotonic() - started
        assert [pod.wait(TIMEOUT) for pod in gang.pods] == [0, 0]
    return {"seconds": seconds, "restarts": attempt - 1, "report": progress(directory)}


def _resumed(directory: Path, attempt: int) -> bool | None:
    return first_step_of(directory, attempt) or progress(directory).get("finished")


def _running(started: float) -> float:
    return time.monotonic() - started


def _fail_after(gang: Any, directory: Path, gap: float) -> bool:
    """SIGKILL rank 1's trainer `gap` seconds into its attempt's training, unless the job finishes first; then wait
    for the gang to say it failed. False when the job finished first."""
    deadline = time.monotonic() + gap
    while time.monotonic() < deadline:
        if progress(directory).get("finished"):
            return False
        time.sleep(0.05)  # a poll at the failure schedule's own resolution, not a wait on a condition
    child = (request_json(gang.address(1), "GET", "/status")[1] or {}).get("child")
    if progress(directory).get("finished") or not child:
        return False
    os.kill(int(child), signal.SIGKILL)
    failed = lambda: (request_json(gang.address(0), "GET", "/gang")[1] or {}).get("state") == "failed"  # noqa: E731
    wait_for(failed, TIMEOUT, "the gang to fail")
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=6000)
    parser.add_argument("--mtbf", type=float, default=30.0, help="mean seconds of training between failures")
    parser.add_argument("--save-seconds", type=float, default=0.5, help="what each checkpoint write takes")
    parser.add_argument("--fixed", default="2,6,20", help="the fixed intervals (everySeconds) to compare")
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument("--prior", type=float, default=PRIOR[0], help="the prior MTBF (the operator's setting)")
    args = parser.parse_args()
    PRIOR[0] = args.prior
    rng = random.Random(args.seed)
    gaps = [rng.expovariate(1 / args.mtbf) for _ in range(200)]
    slow_saves = {"TJ_TEST_SAVE_DELAY_SECONDS": str(args.save_seconds)}
    with tempfile.TemporaryDirectory() as workdir:
        base = run(Path(workdir) / "baseline", args.steps, NO_PERIODIC, None, False)["seconds"]
        print(f"baseline (no failure, no checkpoint): {base:.1f} s from the first step to the last")
        goodput: dict[str, float] = {}
        for interval in [None, *(float(x) for x in args.fixed.split(","))]:
            name = "Auto" if interval is None else f"every {interval:g} s"
            env = interval_env(interval) | slow_saves
            result = run(Path(workdir) / name.replace(" ", "-"), args.steps, env, gaps, interval is None)
            goodput[name] = base / result["seconds"]
            chosen = (result["report"].get("checkpointPacing") or {}).get("intervalSeconds")
            said = f", Auto's last interval {chosen:.1f} s" if interval is None and chosen else ""
            print(f"{name:>12}: {result['seconds']:.1f} s, {result['restarts']} restarts, goodput {goodput[name]:.3f}"
                  f" ({result['report'].get('checkpointSaves', '?')} saves in the last attempt{said})")  # fmt: skip
    best = max((value, name) for name, value in goodput.items() if name != "Auto")
    print(f"Auto {goodput['Auto']:.3f} against the best fixed interval ({best[1]}) {best[0]:.3f}:"
          f" {100 * (goodput['Auto'] - best[0]):+.1f} points")  # fmt: skip


if __name__ == "__main__":
    main()
