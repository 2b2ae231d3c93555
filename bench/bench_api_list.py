"""List latency of the REST API (served from its watch-fed cache) against a direct LIST through the apiserver."""

import statistics
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import httpx
import uvicorn
from kubernetes import client
from tests.integration.conftest import install_crd
from tests.support.controlplane import ControlPlane, running
from tests.support.processes import free_port, poll_until

from trainingjob.model import GROUP, PLURAL, VERSION
from trainingjob_api.app import create_app
from trainingjob_api.settings import ApiSettings

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


def caller_token(api: client.ApiClient) -> str:
    """A ServiceAccount allowed to list jobs everywhere, as a REST API caller would be."""
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    core.create_namespaced_service_account("bench-0", client.V1ServiceAccount(metadata={"name": "bench"}))
    rule = client.V1PolicyRule(api_groups=[GROUP], resources=[PLURAL], verbs=["get", "list", "watch"])
    rbac.create_cluster_role(client.V1ClusterRole(metadata={"name": "bench"}, rules=[rule]))
    ref = client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name="bench")
    subject = client.RbacV1Subject(kind="ServiceAccount", name="bench", namespace="bench-0")
    rbac.create_cluster_role_binding(
        client.V1ClusterRoleBinding(metadata={"name": "bench"}, role_ref=ref, subjects=[subject])
    )
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=["trainingjob-api"]))
    return str(core.create_namespaced_service_account_token("bench", "bench-0", request).status.token)


@contextmanager
def serve(plane: ControlPlane) -> Iterator[str]:
    """The REST API on a loopback port, its cache holding every job."""
    config = uvicorn.Config(create_app(ApiSettings(kubeconfig=plane.kubeconfig)), host="127.0.0.1", port=free_port(),
                            log_level="warning")  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{config.port}"
    poll_until(lambda: httpx.get(f"{url}/readyz").json().get("jobs") == JOBS, timeout=120, what="the cache full")
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(30)


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
        with plane.api_client() as api:
            install_crd(api)
            for index in range(NAMESPACES):
                client.CoreV1Api(api).create_namespace(client.V1Namespace(metadata={"name": f"bench-{index}"}))
            token = caller_token(api)
        start = time.perf_counter()
        create_jobs(plane)
        print(f"created {JOBS} TrainingJobs in {NAMESPACES} namespaces in {time.perf_counter() - start:.1f} s")
        with serve(plane) as url:
            measure(url, token, plane)


if __name__ == "__main__":
    main()
