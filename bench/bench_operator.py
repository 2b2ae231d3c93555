"""Benchmark: how fast the operator starts and restarts gangs on the cluster tier, against creating the same
pods directly (the floor: no operator), measured side by side in one run.

Run: python bench/bench_operator.py [--repetitions N] (needs TJ_CONTROLPLANE_BIN, as `make bench` sets).
Scenarios: 1 job x 64 ranks and 100 jobs x 4 ranks, apply -> every pod Running; and a rank failure of the
64-rank job -> every pod of the next attempt created. Prints medians and ratios (operator / direct).
"""

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "operator")]

from kubernetes import client  # noqa: E402
from testbed import kwok, pods  # noqa: E402
from testbed.controlplane import Binaries, ControlPlane  # noqa: E402
from testbed.crds import install_crd  # noqa: E402
from testbed.namespaces import create_namespace  # noqa: E402
from testbed.operator import OperatorProcess  # noqa: E402
from testbed.processes import poll_until  # noqa: E402

from trainingjob.children.specs import pod_manifest, replicas  # noqa: E402
from trainingjob.model import GROUP, PLURAL, VERSION, TrainingJob  # noqa: E402

POOL = ThreadPoolExecutor(max_workers=16)


def job_manifest(name: str, ranks: int) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TrainingJob",
        "metadata": {"name": name},
        "spec": {"workers": {"replicas": ranks}, "trainer": {"steps": 100}},
    }


def running(core: client.CoreV1Api, namespace: str, expected: int, attempt: str | None = None) -> bool:
    items = core.list_namespaced_pod(namespace, _preload_content=False)
    found: list[dict[str, Any]] = json.loads(items.data)["items"]
    if attempt is not None:
        found = [p for p in found if p["metadata"]["labels"].get("trainingjob.io/attempt") == attempt]
    return bool(sum((p.get("status") or {}).get("phase") == "Running" for p in found) >= expected)


def timed(start: Callable[[], None], done: Callable[[], bool]) -> float:
    began = time.monotonic()
    start()
    poll_until(done, timeout=120, interval=0.05, what="the pods")
    return time.monotonic() - began


def through_operator(api: client.ApiClient, namespace: str, jobs: int, ranks: int) -> float:
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)

    def create() -> None:
        names = [f"job-{index}" for index in range(jobs)]
        list(
            POOL.map(
                lambda n: custom.create_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, job_manifest(n, ranks)
                ),
                names,
            )
        )

    return timed(create, lambda: running(core, namespace, jobs * ranks))


def direct(api: client.ApiClient, namespace: str, jobs: int, ranks: int) -> float:
    """The same pods, created in parallel by a plain client: what any controller must at least spend."""
    core = client.CoreV1Api(api)
    manifests = []
    for index in range(jobs):
        job = TrainingJob.model_validate(
            job_manifest(f"job-{index}", ranks) | {"metadata": {"name": f"job-{index}", "namespace": namespace}}
        )
        manifests += [pod_manifest(job, "00000000-0000-0000-0000-000000000000", r, 1) for r in replicas(job)]
    for manifest in manifests:
        del manifest["metadata"]["ownerReferences"]
        del manifest["spec"]["schedulingGates"]  # the operator's tracking gate is part of what it costs

    def create() -> None:
        list(POOL.map(lambda m: core.create_namespaced_pod(namespace, m), manifests))

    return timed(create, lambda: running(core, namespace, len(manifests)))


def restart(api: client.ApiClient, namespace: str, ranks: int) -> float:
    """A rank of a running job fails -> every pod of attempt 2 exists."""
    core = client.CoreV1Api(api)
    through_operator(api, namespace, 1, ranks)

    def fail() -> None:
        pods.finish_pod(core, namespace, "job-0-worker-1-1", 75)

    return timed(fail, lambda: running(core, namespace, ranks, attempt="2"))


def measure_in_fresh_namespace(
    api: client.ApiClient, counter: list[int], measure: Callable[[client.ApiClient, str], float]
) -> float:
    """Measure in a new namespace, then delete it and wait for its pods to go: the nodes hold 660 pods."""
    namespace = fresh_namespace(api, counter)
    try:
        return measure(api, namespace)
    finally:
        core = client.CoreV1Api(api)
        core.delete_namespace(namespace)
        poll_until(lambda: not core.list_namespaced_pod(namespace).items, timeout=300, what=f"{namespace} emptied")


def fresh_namespace(api: client.ApiClient, counter: list[int]) -> str:
    counter[0] += 1
    name = f"bench-{counter[0]}"
    create_namespace(client.CoreV1Api(api), name)
    return name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repetitions", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tj-bench-") as root:
        plane = ControlPlane(Path(root), Binaries.from_environment(), cluster=True)
        plane.start()
        operator = OperatorProcess(plane.kubeconfig, Path(root), TJ_OPERATOR_BACKOFF_BASE_SECONDS="0.1")
        try:
            with plane.api_client() as api:
                install_crd(api)
                for index in range(4):  # room for 400 pods: 6 nodes x 110
                    client.CoreV1Api(api).create_node(kwok.gpu_node(f"extra-node-{index}", f"127.0.11.{index + 1}"))
                operator.start()
                report(api, args.repetitions)
        finally:
            operator.stop()
            plane.stop()


def report(api: client.ApiClient, repetitions: int) -> None:
    counter = [0]
    results: dict[str, list[float]] = {}
    scenarios = {"1 job x 64 ranks": (1, 64), "100 jobs x 4 ranks": (100, 4)}
    for repetition in range(repetitions):
        for label, (jobs, ranks) in scenarios.items():
            sides = [("operator", through_operator), ("direct", direct)]
            for side, measure in sides if repetition % 2 == 0 else reversed(sides):
                seconds = measure_in_fresh_namespace(api, counter, partial(measure, jobs=jobs, ranks=ranks))
                results.setdefault(f"{label}: {side}", []).append(seconds)
        seconds = measure_in_fresh_namespace(api, counter, partial(restart, ranks=64))
        results.setdefault("64-rank failure -> attempt 2 running", []).append(seconds)
    print(f"{'scenario':48} {'median s':>9}  runs")
    for label, values in results.items():
        print(f"{label:48} {statistics.median(values):9.2f}  {', '.join(f'{v:.2f}' for v in values)}")
    for label in scenarios:
        ratio = statistics.median(results[f"{label}: operator"]) / statistics.median(results[f"{label}: direct"])
        print(f"ratio operator/direct, {label}: {ratio:.2f}")
    restart_ratio = statistics.median(results["64-rank failure -> attempt 2 running"]) / statistics.median(
        results["1 job x 64 ranks: direct"]
    )
    print(f"ratio restart/direct start, 64 ranks: {restart_ratio:.2f}")


if __name__ == "__main__":
    main()
