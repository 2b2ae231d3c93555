"""Benchmark: following a gang's pods through the apiserver's watch, with our informer (kube.watch, what the
operator and the REST API use) against kopf's watch stream and an @kopf.on.event handler (how a kopf operator would
follow them), side by side in one run on the envtest tier (etcd + kube-apiserver).

Both feed the same memory (the operator's Store) in a process of their own. The scenario: N pods that carry a job
label; each side lists them, then every pod is changed R times (N x R watch events, as a gang's pods are released,
scheduled and started). Measured per side: CPU seconds to take in the list, CPU seconds per thousand watch events,
and the lag from the last change written to the last event taken. Prints medians over the repetitions (the sides
alternate) and the ratio kopf / ours.

Run: python bench/bench_watch.py [--pods 1024] [--rounds 3] [--repetitions 3] (needs TJ_CONTROLPLANE_BIN).
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "operator")]

from kubernetes import client  # noqa: E402
from testbed.controlplane import ControlPlane, running  # noqa: E402
from testbed.namespaces import create_namespace  # noqa: E402

from trainingjob.children.naming import JOB_LABEL  # noqa: E402

NAMESPACE = "bench"
SIDES = ("ours", "kopf")
POOL = ThreadPoolExecutor(max_workers=16)


def pod(name: str) -> dict[str, object]:
    return {
        "metadata": {"name": name, "labels": {JOB_LABEL: "gang"}},
        "spec": {"containers": [{"name": "trainer", "image": "trainer:bench"}]},
    }


def change_all(core: client.CoreV1Api, names: list[str], round_: int) -> None:
    patch = {"metadata": {"annotations": {"bench/round": str(round_)}}}
    list(POOL.map(lambda name: core.patch_namespaced_pod(name, NAMESPACE, patch, _preload_content=False), names))


def read_mark(process: subprocess.Popen[str], mark: str, timeout: float) -> tuple[float, float]:
    """Wait for the side's `mark` line: (its CPU seconds, its monotonic time)."""
    deadline = time.monotonic() + timeout
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            raise RuntimeError(f"the side ended before {mark}")
        word, cpu, when = line.split()
        if word == mark:
            return float(cpu), float(when)
    raise TimeoutError(mark)


def one_run(
    plane: ControlPlane, core: client.CoreV1Api, side: str, names: list[str], *, rounds: int, tag: int
) -> dict[str, float]:
    events = len(names) * rounds
    argv = [sys.executable, str(REPO / "bench" / "watch_side.py"), side, str(plane.kubeconfig), NAMESPACE]
    env = {**os.environ, "KUBECONFIG": str(plane.kubeconfig)}
    process = subprocess.Popen([*argv, str(len(names)), str(events)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        start_cpu, _ = read_mark(process, "START", 60)
        listed_cpu, _ = read_mark(process, "LISTED", 120)
        for round_ in range(rounds):
            change_all(core, names, tag * 100 + round_)
        written = time.monotonic()
        done_cpu, done = read_mark(process, "DONE", 300)
    finally:
        process.kill()
        process.wait()
    return {
        "list_cpu": listed_cpu - start_cpu,
        "cpu_per_1000_events": (done_cpu - listed_cpu) * 1000 / events,
        "lag": max(0.0, done - written),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repetitions", type=int, default=3)
    args = parser.parse_args()
    with running(cluster=False) as plane, plane.api_client() as api:
        core = client.CoreV1Api(api)
        create_namespace(core, NAMESPACE)
        names = [f"gang-worker-{i}-1" for i in range(args.pods)]
        list(POOL.map(lambda name: core.create_namespaced_pod(NAMESPACE, pod(name), _preload_content=False), names))
        results: dict[str, list[dict[str, float]]] = {side: [] for side in SIDES}
        for repetition in range(args.repetitions):
            order = SIDES if repetition % 2 == 0 else tuple(reversed(SIDES))
            for side in order:
                tag = repetition * len(SIDES) + SIDES.index(side)
                results[side].append(one_run(plane, core, side, names, rounds=args.rounds, tag=tag))
    print(f"{args.pods} pods, {args.rounds} changes each, {args.repetitions} repetitions (median)")
    for key, unit in (("list_cpu", "s"), ("cpu_per_1000_events", "s"), ("lag", "s")):
        ours, kopf = (statistics.median(r[key] for r in results[side]) for side in SIDES)
        ratio = f"{kopf / ours:.2f}x" if ours > 0 else "n/a"
        print(f"  {key:22s} ours {ours:8.3f} {unit}   kopf {kopf:8.3f} {unit}   kopf / ours {ratio}")


if __name__ == "__main__":
    main()
