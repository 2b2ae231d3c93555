"""Benchmark: an in-place restart (TJ_IN_PLACE=1) from a warm spare against one that starts its trainer cold.

Run: python bench/bench_in_place_restart.py [--repetitions N]. Each repetition starts a 2-pod digits DDP gang of
in-place agents on loopback, SIGKILLs rank 1's trainer once a checkpoint exists, waits for the coordinator to
report the gang failed and orders attempt 2; it measures, from the coordinator's log, the time from the order's
arrival ("ordered: attempt 2") to the later of the two ranks' first step of attempt 2. Warm (the default) and cold
(TJ_TEST_NO_SPARE=1: every attempt's child imports torch after the order) alternate. Also prints a warm spare's
anonymous resident memory, what keeping one costs a pod (its file-backed pages, torch's libraries, are shared
with the trainer).
"""

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "trainer-image")]

from testbed.trainer_procs import (  # noqa: E402
    AgentGang,
    Pod,
    config_json,
    pods_cleanup,
    read_json,
    start_agent_gang,
    wait_for,
)

from trainer.agent_http import request_json  # noqa: E402

CONFIG = config_json(workload="digits-mlp", steps=200, batchSize=32, learningRate=0.1, momentum=0.9, seed=7)
TIMEOUT = 120.0


def logged_at(pod: Pod, text: str) -> float:
    """When `pod` first logged a line holding `text` (the logging format's local time, to the millisecond)."""
    line = next(line for line in pod.text().splitlines() if text in line)
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def spare_anonymous_mib(gang: AgentGang) -> float:
    """Node 0's warm spare's anonymous resident memory: its own (its file-backed pages, torch's libraries, are
    shared with the trainer beside it)."""
    status = request_json(gang.address(0), "GET", "/status")[1] or {}
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{status['spare']}/status").read_text().splitlines())
    return int(fields["RssAnon"].split()[0]) / 1024


def restart_seconds(directory: Path, *, warm: bool) -> tuple[float, float | None]:
    """One gang, one failure, one order: (order to first step of attempt 2, the spare's memory in MiB)."""
    (directory / "logs").mkdir(parents=True)
    with pods_cleanup() as pods:
        extra = {"TJ_TEST_STEP_DELAY_SECONDS": "0.03"} | ({} if warm else {"TJ_TEST_NO_SPARE": "1"})
        gang = start_agent_gang(pods, directory / "logs", directory / "job", 2, config=CONFIG, **extra)
        progress = directory / "job" / "progress.json"
        wait_for(lambda: (read_json(progress) or {}).get("lastCheckpointStep"), TIMEOUT, "a checkpoint")
        memory = spare_anonymous_mib(gang) if warm else None
        os.kill((request_json(gang.address(1), "GET", "/status")[1] or {})["child"], signal.SIGKILL)
        failed = lambda: (request_json(gang.address(0), "GET", "/gang")[1] or {}).get("state") == "failed"  # noqa: E731
        wait_for(failed, TIMEOUT, "the gang to fail")
        assert request_json(gang.address(0), "POST", "/attempt", body={"attempt": 2}, key=gang.key)[0] == 200
        assert [pod.wait(TIMEOUT) for pod in gang.pods] == [0, 0]
        ordered = logged_at(gang.pods[0], "ordered: attempt 2")
        first_step = max(logged_at(pod, "attempt 2: first step done") for pod in gang.pods)
        return first_step - ordered, memory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repetitions", type=int, default=3)
    args = parser.parse_args()
    times: dict[bool, list[float]] = {True: [], False: []}
    memory: list[float] = []
    with tempfile.TemporaryDirectory() as workdir:
        for repetition in range(args.repetitions):
            for warm in (repetition % 2 == 0, repetition % 2 == 1):
                started = time.monotonic()
                seconds, rss = restart_seconds(Path(workdir) / f"{repetition}-{warm}", warm=warm)
                times[warm].append(seconds)
                memory += [rss] if rss is not None else []
                kind = "warm spare" if warm else "cold"
                print(f"{kind:>10}: order to first step {seconds:.2f} s (run {time.monotonic() - started:.0f} s)")
    warm_median, cold_median = statistics.median(times[True]), statistics.median(times[False])
    print(f"median order to first step: warm spare {warm_median:.2f} s, cold {cold_median:.2f} s")
    print(f"cold / warm: {cold_median / warm_median:.1f}x")
    print(f"a warm spare's own (anonymous) resident memory: {statistics.median(memory):.0f} MiB")


if __name__ == "__main__":
    main()
