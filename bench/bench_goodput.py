"""Benchmark: goodput in time, with rank 1's trainer killed every minute of training, in local mode.

Run: python bench/bench_goodput.py [--minutes 10] [--kill-every 60] [--clean-minutes 2] [--prior SECONDS]
[--no-baseline]. The
operator's planner and reconcile run the digits DDP example (2 ranks) as `tjctl run` does: real trainer processes
under in-place agents, the operator's restarts in place (at once after an attempt that saved a checkpoint, else after
the crash loop's backoff: 1 s in local mode).

A first run without failures and without checkpoints measures the trainer's step time from outside: the times its
metrics log gives its first and its last logged step, over the steps between (so it includes whatever else a step costs:
logging, evaluations; and excludes startup and saves). The measured run has enough steps for --minutes of training
at that pace, checkpoints `everySteps: Auto`, and rank 1's trainer is SIGKILLed each --kill-every seconds after its
attempt's first step. Auto's prior for the job's first failure (TJ_OPERATOR_CHECKPOINT_PRIOR_MTBF_SECONDS, 6 h by
default) is --prior, by default the failure rate the run injects: the run compresses a cluster's hours between failures
into a minute, and an operator sets its prior to its own clusters' rate (with 6 h here, the first failure redoes up
to one interval of 20-45 s; `--prior 21600` shows it).

Goodput measured by the benchmark, two ways, both over the measured run's wall time (from the job's creation to its
end):
- in work (from outside): the job's steps times the clean step time (each step once). Training that ran slower than
  the clean run (on this machine: the warm spares' imports after each restart, about 3 s of CPU each, on 2 cores the
  training fills) counts as lost.
- in time (without the operator, from the trainer's own log): rank 0's metrics log keeps each step once (a resumed
  attempt drops the lines past the step it resumed from); each attempt's kept steps, from its first logged step to
  the next attempt's first logged step (or the job's last step), at the pace that attempt logged. The same source
  and definition as the status's productive time, so the two agree largely by construction: what it checks is the
  operator's accounting of attempts, resumes and redone steps. Unlike the status it counts checkpoint stalls as
  training.
Printed beside the goodput the job's status reports (status.goodput.ratio) and its split.

The measured run runs twice, side by side: with each pod's zygote forking the warm spares (trainer.zygote), then the
baseline, spares as new processes that import torch (TJ_TEST_NO_ZYGOTE=1), and the ratio of the two.
"""

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "operator"), str(REPO / "api"), str(REPO / "trainer-image"), str(REPO)]

from trainer.agent import NO_ZYGOTE  # noqa: E402
from trainer.agent_http import request_json  # noqa: E402
from trainingjob.local.cluster import LOCAL_SETTINGS, run_local  # noqa: E402
from trainingjob.model import TrainingJobStatus  # noqa: E402
from trainingjob.plan import Settings  # noqa: E402

EXAMPLE = REPO / "examples" / "digits-ddp.yaml"
BASELINE = "baseline (spares as new processes, TJ_TEST_NO_ZYGOTE=1)"


def job(steps: int, every_steps: int | str) -> dict[str, Any]:
    manifest = yaml.safe_load(EXAMPLE.read_text())
    manifest["spec"]["trainer"]["steps"] = steps
    manifest["spec"]["checkpoint"]["everySteps"] = every_steps
    manifest["spec"]["runPolicy"]["backoffLimit"] = 1000
    return dict(manifest)


def rank1_trainer(workdir: Path) -> int | None:
    """Rank 1's trainer: the child its agent (the process of the work folder with RANK=1 and TJ_IN_PLACE=1) runs."""
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            env = dict(item.split("=", 1) for item in environ.read_text().split("\0") if "=" in item)
        except OSError:
            continue
        if str(workdir) in env.get("TJ_PROGRESS_FILE", "") and env.get("RANK") == "1" and env.get("TJ_IN_PLACE"):
            answer = request_json(("127.0.0.1", int(env["TJ_AGENT_PORT"])), "GET", "/status")[1] or {}
            return int(answer["child"]) if answer.get("child") else None
    return None


class Killer:
    """Kills rank 1's trainer `every` seconds after each attempt's first step, as the status reports it."""

    def __init__(self, workdir: Path, every: float) -> None:
        self.workdir, self.every = workdir, every
        self.first_step: tuple[int, float] | None = None  # (attempt, when this process saw its first step)
        self.kills, self.killed = 0, 0  # how many, and the last attempt killed
        self.done = threading.Event()
        self.pacing: dict[int, str] = {}  # each attempt's checkpoint pacing, as rank 0 last reported it

    def on_status(self, status: TrainingJobStatus) -> None:
        progress, attempt = status.progress, status.attempt
        if progress is not None and progress.checkpoint_pacing is not None and progress.attempt is not None:
            self.pacing[progress.attempt] = progress.checkpoint_pacing.reason
        began = progress is not None and progress.first_step_time is not None and progress.attempt == attempt
        if began and attempt > self.killed and (self.first_step is None or self.first_step[0] != attempt):
            self.first_step = (attempt, time.monotonic())

    def run(self) -> None:
        while not self.done.wait(0.05):  # the failure schedule's resolution
            seen = self.first_step
            if seen is None or time.monotonic() - seen[1] < self.every:
                continue
            pid = rank1_trainer(self.workdir)
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
                self.kills, self.killed = self.kills + 1, seen[0]
                self.first_step = None  # the next attempt's first step starts the next minute


def clean_step_seconds(workdir: Path, steps: int) -> float:
    """A run without failures and without a save before its end: seconds per step, first step to last."""
    status, _ = run_local(job(steps, steps), workdir, on_event=lambda event: None)
    assert status is not None and status.phase.value == "Succeeded", status
    lines = (json.loads(line) for line in (workdir / "checkpoints" / "metrics.jsonl").read_text().splitlines())
    train = [(line["step"], line["time"]) for line in lines if line["kind"] == "train"]
    (first, began), (last, ended) = train[0], train[-1]
    assert last == steps and len(train) > 1, f"train lines from step {first} to {last} of {steps}"
    return float(ended - began) / float(last - first)


def productive_in_time(workdir: Path, steps: int) -> float:
    """Seconds of training the kept steps took, from rank 0's metrics log: each attempt's kept steps (from its first
    logged step to where the next attempt's lines begin, or the job's last step) at the pace that attempt logged."""
    lines = (json.loads(line) for line in (workdir / "checkpoints" / "metrics.jsonl").read_text().splitlines())
    by_attempt: dict[int, list[tuple[int, float]]] = {}
    for line in lines:
        if line["kind"] == "train":
            by_attempt.setdefault(line["attempt"], []).append((line["step"], line["time"]))
    attempts = [records for _, records in sorted(by_attempt.items()) if len(records) > 1]
    if not attempts:
        return 0.0
    ends = [records[0][0] for records in attempts[1:]] + [steps]
    total = 0.0
    for records, end in zip(attempts, ends, strict=True):
        (first, began), (last, ended) = records[0], records[-1]
        total += (ended - began) / (last - first) * (end - first)
    return total


@dataclass(frozen=True)
class Outcome:
    """One measured run: its wall time, goodput from outside (in work) and from the trainer's log (in time)."""

    wall: float
    outside: float
    in_time: float


def measured_run(workdir: Path, steps: int, step: float, every: float, settings: Settings) -> Outcome:
    """The measured run: `steps` steps, Auto checkpoints, rank 1's trainer killed `every` seconds into each attempt."""
    killer = Killer(workdir, every)
    thread = threading.Thread(target=killer.run, daemon=True)
    thread.start()
    started = time.monotonic()
    status, _ = run_local(
        job(steps, "Auto"), workdir, on_status=killer.on_status, on_event=lambda event: None, settings=settings
    )
    wall = time.monotonic() - started
    killer.done.set()
    assert status is not None and status.phase.value == "Succeeded" and status.goodput is not None, status
    in_time = productive_in_time(workdir, steps)
    outside = steps * step / wall
    split = status.goodput
    print(f"  {killer.kills} kills, {status.in_place_restarts} restarts in place, wall {wall:.0f} s")
    print(
        f"  productive: from outside, in work {steps * step:.0f} s; from the trainer's log, in time {in_time:.0f} s;"
        f" as the status says {split.productive_seconds} s"
    )
    print(
        f"  goodput: from outside, in work {outside:.3f} (goal >= 0.95); from the trainer's log, in time"
        f" {in_time / wall:.3f}; as the status says {split.ratio}"
    )
    print(f"  status minus the trainer's log, in time: {100 * ((split.ratio or 0) - in_time / wall):+.1f} points")
    print(f"  status minus outside: {100 * ((split.ratio or 0) - outside):+.1f} points")
    parts = ("productive", "startup", "checkpoint_stall", "recovery", "redone", "queued")
    print("  status split: " + ", ".join(f"{part} {getattr(split, part + '_seconds')} s" for part in parts))
    for record in status.history.attempts if status.history else []:
        print(
            f"    attempt {record.attempt}: resumed from {record.resumed_from_step}, got to {record.last_step}; "
            f"checkpoints {killer.pacing.get(record.attempt, '?')}"
        )
    return Outcome(wall, outside, in_time / wall)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--kill-every", type=float, default=60.0)
    parser.add_argument("--clean-minutes", type=float, default=2.0)
    parser.add_argument("--prior", type=float, help="Auto's prior MTBF in seconds (default: --kill-every)")
    parser.add_argument(
        "--no-baseline", action="store_true", help="skip the baseline run (spares as new processes, no zygote)"
    )
    args = parser.parse_args()
    settings = replace(LOCAL_SETTINGS, checkpoint_prior_mtbf_seconds=args.prior or args.kill_every)
    variants = [("zygote (spares forked)", "0")] + ([] if args.no_baseline else [(BASELINE, "1")])
    with tempfile.TemporaryDirectory() as root:
        probe = clean_step_seconds(Path(root) / "probe", 500)  # sizes the clean run
        step = clean_step_seconds(Path(root) / "clean", int(args.clean_minutes * 60 / probe))
        steps = int(args.minutes * 60 / step)
        print(
            f"clean run: {1 / step:.1f} steps/s; measured run: {steps} steps ({args.minutes:g} min at that pace); "
            f"Auto's prior {settings.checkpoint_prior_mtbf_seconds:g} s between failures"
        )
        outcomes = {}
        for name, no_zygote in variants:
            print(f"{name}:", flush=True)
            os.environ[NO_ZYGOTE] = no_zygote  # the pods' agents read it (local mode passes our environment on)
            outcomes[name] = measured_run(Path(root) / name.split()[0], steps, step, args.kill_every, settings)
    if BASELINE in outcomes:
        ours, base = outcomes[variants[0][0]], outcomes[BASELINE]
        print(
            f"zygote against the baseline: goodput from outside {ours.outside:.3f} / {base.outside:.3f} = "
            f"{ours.outside / base.outside:.3f}x; wall {ours.wall:.0f} / {base.wall:.0f} s"
            f" = {ours.wall / base.wall:.3f}x"
        )


if __name__ == "__main__":
    main()
