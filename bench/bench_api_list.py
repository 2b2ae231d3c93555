"""List latency of the REST API (served from its watch-fed cache) against a direct LIST through the apiserver."""

import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
from bench.api_world import prepare, serve
from kubernetes import client
from testbed.controlplane import ControlPlane, running

from trainingjob.model import GROUP, PLURAL, VERSION

JOBS = 5000
NAMESPACES = 10
ROUNDS = 200
THREADS = 32


def manifest(index: int) -> dict[str, object]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TrainingJob",
        "metadata": {"name": f"job-{index:05d}", "labels": {"shard": str(index % 100)}},
        "spec": {"workers": {"replicas": 4}, "trainer": {"steps": 1000}},
    }


def create_jobs(plane: ControlPlane) -> None:
    local = threading.local()

    def create(index: int) -> None:
        if not hasattr(local, "jobs"):
            local.jobs = client.CustomObjectsApi(plane.api_client())
        local.jobs.create_namespaced_custom_object(
            GROUP, VERSION, f"bench-{index % NAMESPACES}", PLURAL, manifest(index)
        )

    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(create, range(JOBS)))


def timed(http: httpx.Client, url: str, params: dict[str, str | int], expected_items: int) -> float:
    start = time.perf_counter()
    response = http.get(url, params=params)
    elapsed = time.perf_counter() - start
    response.raise_for_status()
    assert len(response.json()["items"]) == expected_items
    return elapsed


def report(name: str, cached: list[float], direct: list[float]) -> None:
    def pct(samples: list[float], q: int) -> float:
        return statistics.quantiles(samples, n=100)[q - 1] * 1000

    print(f"{name}")
    for label, samples in (("REST API (cache)", cached), ("direct apiserver LIST", direct)):
        print(f"  {label:24s} p50 {pct(samples, 50):7.2f} ms   p99 {pct(samples, 99):7.2f} ms")
    p50, p99 = pct(direct, 50) / pct(cached, 50), pct(direct, 99) / pct(cached, 99)
    print(f"  ratio direct/cache       p50 {p50:6.1f}x      p99 {p99:6.1f}x")


def measure(api_url: str, token: str, plane: ControlPlane) -> None:
    auth = {"Authorization": f"Bearer {token}"}  # the same caller on both sides
    kube = httpx.Client(base_url=plane.server_url, verify=str(plane.pki.cert), headers=auth, timeout=60)
    rest = httpx.Client(base_url=api_url, headers=auth, timeout=60)
    scenarios: list[tuple[str, str, dict[str, str | int], int]] = [
        ("one namespace (500 jobs)", "/namespaces/bench-3/trainingjobs", {}, JOBS // NAMESPACES),
        ("all namespaces, labelSelector shard=7 (50 jobs)", "/trainingjobs", {"labelSelector": "shard=7"}, 50),
        ("all namespaces, limit=100 (first page)", "/trainingjobs", {"limit": 100}, 100),
    ]
    for name, path, params, expected in scenarios:
        cached: list[float] = []
        direct: list[float] = []
        for _ in range(ROUNDS):  # interleaved, so both see the same machine load
            cached.append(timed(rest, f"/api/v1{path}", params, expected))
            direct.append(timed(kube, f"/apis/{GROUP}/{VERSION}{path}", params, expected))
        report(name, cached, direct)


def main() -> None:
    with running(cluster=False, prefix="tj-bench-api-") as plane:
        token = prepare(plane, NAMESPACES)
        start = time.perf_counter()
        create_jobs(plane)
        print(f"created {JOBS} TrainingJobs in {NAMESPACES} namespaces in {time.perf_counter() - start:.1f} s")
        with serve(plane, JOBS, token) as url:
            measure(url, token, plane)


if __name__ == "__main__":
    main()
