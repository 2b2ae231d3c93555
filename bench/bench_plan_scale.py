"""One reconcile's decision for one gang, as the gang grows: what observe() and plan() cost per pod at 1,024 and
10,240 ranks, three ways alternately in the same run: at Python's garbage collector thresholds; at the operator's
(runtime/gc_tuning.py); and at the operator's with its memory of the pods read before (children/pod_memory.py:
the pass after one that read the same pods, as while a gang comes up and few of its pods change between two
reconciles). No cluster: each side is pure CPU on the same pods.

Run: python bench/bench_plan_scale.py [--ranks 1024,10240] [--rounds 5]. Prints the median milliseconds of one pass
(the pods observed, then planned: every pod Running, the status reading them back as the operator does) for each size
and side, the cost per pod, and ratios: each side against the defaults at each size, and per pod at the largest size
against the smallest (1.00 is linear).

Measured (2 cores, quiet): at 10,240 ranks 622 ms at the defaults, 448 ms at the operator's thresholds (0.72x), 185 ms
with the memory too (0.30x); at 1,024 ranks 42, 40 (0.95x) and 13 ms (0.31x). Earlier runs of the thresholds alone,
under load: 0.80x and 0.81x at 10,240, 0.82x and 0.97x at 1,024. Per pod, 10,240 against 1,024 ranks came out at
0.94x to 1.48x across runs: this machine's noise is larger than the difference, so no claim of linearity here."""

import argparse
import gc
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "operator")]

from trainingjob.children.naming import CONTAINER_NAME  # noqa: E402
from trainingjob.children.observe import Read, observe, pod_state  # noqa: E402
from trainingjob.children.pod_memory import PodMemory  # noqa: E402
from trainingjob.children.specs import pod_manifest, replicas  # noqa: E402
from trainingjob.model import TrainingJob, TrainingJobStatus  # noqa: E402
from trainingjob.plan import Plan, plan  # noqa: E402
from trainingjob.runtime import gc_tuning  # noqa: E402

T0 = datetime(2026, 1, 1, tzinfo=UTC)
JOB_UID = "job-uid"
DEFAULTS = gc.get_threshold()
KEY = ("bench", "big")
SIDES = (  # name, collector thresholds, with the pod memory
    ("defaults", DEFAULTS, False),
    ("operator-gc", gc_tuning.THRESHOLDS, False),
    ("operator-gc+memory", gc_tuning.THRESHOLDS, True),
)


def _job(ranks: int) -> TrainingJob:
    return TrainingJob.from_manifest(
        {
            "apiVersion": "trainingjob.io/v1alpha1",
            "kind": "TrainingJob",
            "metadata": {"name": "big", "namespace": "bench", "uid": JOB_UID, "creationTimestamp": T0.isoformat()},
            "spec": {"workers": {"replicas": ranks}, "trainer": {"steps": 100}},
        }
    )


def _running(job: TrainingJob) -> list[dict[str, Any]]:
    pods = []
    for replica in replicas(job):
        manifest = pod_manifest(job, JOB_UID, replica, 1)
        manifest["metadata"].update(uid=f"uid-{replica.index}", creationTimestamp=T0.isoformat(), resourceVersion="7")
        manifest["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        pods.append(manifest)
    return pods


def _pass(job: TrainingJob, pods: list[dict[str, Any]], now: datetime, read: Read = pod_state) -> Plan:
    owned = {"metadata": {"ownerReferences": [{"uid": JOB_UID, "controller": True}]}}
    return plan(job, observe(pods, CONTAINER_NAME, job_uid=JOB_UID, service=owned, read=read), now)


def _read_back(status: TrainingJobStatus) -> TrainingJobStatus:
    return TrainingJobStatus.model_validate(status.model_dump(mode="json", by_alias=True, exclude_none=True))


def _settled(ranks: int) -> tuple[TrainingJob, list[dict[str, Any]]]:
    """The gang created and recorded: the status as the operator reads it once every pod runs."""
    job = _job(ranks)
    job = job.model_copy(update={"status": _read_back(_pass(job, [], T0).status)})
    pods = _running(job)
    job = job.model_copy(update={"status": _read_back(_pass(job, pods, T0 + timedelta(seconds=1)).status)})
    return job, pods


def _median_ms(job: TrainingJob, pods: list[dict[str, Any]], rounds: int, memory: PodMemory | None) -> float:
    if memory is not None:
        _pass(job, pods, T0, memory.reader(KEY))  # the reconcile before, which read these pods
    times = []
    for i in range(rounds):
        read = memory.reader(KEY) if memory is not None else pod_state
        started = time.perf_counter()
        _pass(job, pods, T0 + timedelta(seconds=2 + i), read)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", default="1024,10240")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    sizes = [int(r) for r in args.ranks.split(",")]
    results: dict[tuple[int, str], float] = {}
    for ranks in sizes:
        job, pods = _settled(ranks)
        for _ in range(2):  # alternately, twice: the machine's noise falls on every side
            for side, thresholds, remembers in SIDES:
                gc.set_threshold(*thresholds)
                ms = _median_ms(job, pods, args.rounds, PodMemory() if remembers else None)
                results[ranks, side] = min(ms, results.get((ranks, side), ms))
        gc.set_threshold(*DEFAULTS)
        base = results[ranks, "defaults"]
        print(
            f"{ranks:>6,} ranks: "
            + ", ".join(
                f"{side} {results[ranks, side]:.0f} ms ({results[ranks, side] / ranks * 1000:.0f} us a pod, "
                f"{results[ranks, side] / base:.2f}x)"
                for side, _, _ in SIDES
            )
        )
    small, large = sizes[0], sizes[-1]
    for side, _, _ in SIDES:
        per_pod = (results[large, side] / large) / (results[small, side] / small)
        print(f"per pod at {large:,} against {small:,} ranks, {side}: {per_pod:.2f}x (1.00: linear)")


if __name__ == "__main__":
    main()
