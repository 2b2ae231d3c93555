"""Benchmark: an in-place restart (TJ_IN_PLACE=1) from a warm spare against one that starts its trainer cold.

Run: python bench/bench_in_place_restart.py [--repetitions N]. Each repetition starts a 2-pod digits DDP gang of
in-place agents on loopback, SIGKILLs rank 1's trainer once a checkpoint exists, waits for the coordinator to
report the gang failed and orders attempt 2; it measures, from the coordinator's log, the time from the order's
arrival ("ordered: attempt 2") to the later of the two ranks' first step of attempt 2. Three kinds take turns: a
spare forked by the pod's zygote (the default), a spare started as a new process (TJ_TEST_NO_ZYGOTE=1), and cold
(TJ_TEST_NO_SPARE=1: every attempt's child imports torch after the order). Also prints what keeping a spare costs
a pod in memory: the proportional anonymous memory (Pss_Anon) of the spare and, with a zygote, of the zygote too
(file-backed pages, torch's libraries, are shared with the trainer; a fork's untouched pages with its zygote).
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


KINDS = {
    "zygote": {},
    "new spare": {"TJ_TEST_NO_ZYGOTE": "1"},
    "cold": {"TJ_TEST_NO_SPARE": "1"},
}


def pss_anon_mib(pid: int) -> float:
    """The process's proportional share of anonymous memory (pages shared with n processes count 1/n)."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:])
    return int(fields["Pss_Anon"].split()[0]) / 1024


def spare_memory_mib(gang: AgentGang, kind: str) -> float | None:
    """What node 0 keeps for its spares (the spare, and the zygote it came from), once the spare is there."""
    if kind == "cold":
        return None
    status = wait_for(lambda: gang.status_with("spare"), TIMEOUT, "a spare")
    return sum(pss_anon_mib(pid) for pid in (status["spare"], status["zygote"]) if pid)


def restart_seconds(directory: Path, kind: str) -> tuple[float, float | None]:
    """One gang, one failure, one order: (order to first step of attempt 2, the spare's memory in MiB)."""
    (directory / "logs").mkdir(parents=True)
    with pods_cleanup() as pods:
        extra = {"TJ_TEST_STEP_DELAY_SECONDS": "0.03"} | KINDS[kind]
        gang = start_agent_gang(pods, directory / "logs", directory / "job", 2, config=CONFIG, **extra)
        progress = directory / "job" / "progress.json"
        wait_for(lambda: (read_json(progress) or {}).get("lastCheckpointStep"), TIMEOUT, "a checkpoint")
        memory = spare_memory_mib(gang, kind)
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
    times: dict[str, list[float]] = {kind: [] for kind in KINDS}
    memory: dict[str, list[float]] = {kind: [] for kind in KINDS}
    order = list(KINDS)
    with tempfile.TemporaryDirectory() as workdir:
        for repetition in range(args.repetitions):
            for kind in order[repetition % 3 :] + order[: repetition % 3]:  # each kind takes each place in turn
                started = time.monotonic()
                seconds, mib = restart_seconds(Path(workdir) / f"{repetition}-{kind.replace(' ', '-')}", kind)
                times[kind].append(seconds)
                memory[kind] += [mib] if mib is not None else []
                print(f"{kind:>10}: order to first step {seconds:.2f} s (run {time.monotonic() - started:.0f} s)")
    medians = {kind: statistics.median(values) for kind, values in times.items()}
    print("median order to first step: " + ", ".join(f"{kind} {value:.2f} s" for kind, value in medians.items()))
    print(
        f"cold / zygote: {medians['cold'] / medians['zygote']:.1f}x; new spare / zygote: "
        f"{medians['new spare'] / medians['zygote']:.2f}x"
    )
    for kind in ("zygote", "new spare"):
        print(
            f"what node 0 keeps for its spares ({kind}), proportional anonymous memory: "
            f"{statistics.median(memory[kind]):.0f} MiB"
        )


if __name__ == "__main__":
    main()
