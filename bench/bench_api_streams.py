"""Latency of the REST API's /healthz and job creates with 200 idle `logs?follow=true` streams open, against the
same with none open, in one run. The streams follow a pod whose kubelet sends one line, then nothing: each holds
a connection from the caller and one to the apiserver, and (the goal) no thread: p99 of creates under 100 ms."""

import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, closing, contextmanager

import httpx
from kubernetes import client
from testbed.controlplane import ControlPlane, running
from testbed.crds import install_crd
from testbed.processes import Server, free_port
from testbed.silent_kubelet import pod_of, silent_node

from trainingjob.model import GROUP, PLURAL, VERSION
from trainingjob_sdk.rest import SAME_SITE

NAMESPACE = "bench"
STREAMS = 200
ROUNDS = 200
JOB = "streamed"


def manifest(name: str) -> dict[str, object]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TrainingJob",
        "metadata": {"name": name},
        "spec": {"workers": {"replicas": 2}, "trainer": {"steps": 10}},
    }


def caller_token(api: client.ApiClient) -> str:
    """A ServiceAccount that may create jobs and read pod logs in the bench namespace."""
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    core.create_namespaced_service_account(NAMESPACE, client.V1ServiceAccount(metadata={"name": "bench"}))
    rules = [
        client.V1PolicyRule(api_groups=[GROUP], resources=[PLURAL], verbs=["get", "create"]),
        client.V1PolicyRule(api_groups=[""], resources=["pods/log"], verbs=["get"]),
    ]
    rbac.create_namespaced_role(NAMESPACE, client.V1Role(metadata={"name": "bench"}, rules=rules))
    ref = client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name="bench")
    subject = client.RbacV1Subject(kind="ServiceAccount", name="bench", namespace=NAMESPACE)
    binding = client.V1RoleBinding(metadata={"name": "bench"}, role_ref=ref, subjects=[subject])
    rbac.create_namespaced_role_binding(NAMESPACE, binding)
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=["trainingjob-api"]))
    return str(core.create_namespaced_service_account_token("bench", NAMESPACE, request).status.token)


def silent_pod(api: client.ApiClient, node: str) -> None:
    """A job's pod on `node`, whose kubelet answers every log request with one line and then nothing."""
    client.CustomObjectsApi(api).create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, manifest(JOB))
    client.CoreV1Api(api).create_namespaced_pod(NAMESPACE, pod_of(JOB, attempt=1, node=node))


@contextmanager
def serve(plane: ControlPlane) -> Iterator[str]:
    """`python -m trainingjob_api` in a process of its own, as deployed; one caller may follow every stream."""
    port = free_port()
    env = {"TJ_API_KUBECONFIG": str(plane.kubeconfig), "TJ_API_PORT": str(port),
           "TJ_API_MAX_LOG_STREAMS_PER_CALLER": str(STREAMS)}  # fmt: skip
    api = Server("trainingjob-api", [sys.executable, "-m", "trainingjob_api"], plane.root, env)
    try:
        url = f"http://127.0.0.1:{port}"
        api.wait_ready(lambda: httpx.get(f"{url}/readyz").status_code == 200, 60)
        yield url
    finally:
        api.stop()


def timed(call: Callable[[], httpx.Response]) -> float:
    start = time.perf_counter()
    response = call()
    elapsed = time.perf_counter() - start
    assert response.status_code in (200, 201), response.text
    return elapsed


def measure(rest: httpx.Client) -> tuple[list[float], list[float]]:
    """ROUNDS of /healthz and of job creates, interleaved."""
    health: list[float] = []
    creates: list[float] = []
    path = f"/api/v1/namespaces/{NAMESPACE}/trainingjobs"
    for _ in range(ROUNDS):
        health.append(timed(lambda: rest.get("/healthz")))
        creates.append(timed(lambda: rest.post(path, json=manifest(f"job-{uuid.uuid4().hex[:10]}"))))
    return health, creates


def pct(samples: list[float], q: int) -> float:
    return statistics.quantiles(samples, n=100)[q - 1] * 1000


def report(name: str, idle: list[float], loaded: list[float]) -> None:
    print(name)
    for label, samples in (("0 streams open", idle), (f"{STREAMS} idle streams open", loaded)):
        print(f"  {label:24s} p50 {pct(samples, 50):7.2f} ms   p99 {pct(samples, 99):7.2f} ms")
    p50, p99 = pct(loaded, 50) / pct(idle, 50), pct(loaded, 99) / pct(idle, 99)
    print(f"  ratio {STREAMS}/0 streams     p50 {p50:6.2f}x      p99 {p99:6.2f}x")


def open_streams(url: str, token: str, stack: ExitStack) -> None:
    auth = {"Authorization": f"Bearer {token}"}
    streams = stack.enter_context(
        httpx.Client(base_url=url, headers=auth, timeout=30, limits=httpx.Limits(max_connections=None))
    )
    logs = f"/api/v1/namespaces/{NAMESPACE}/trainingjobs/{JOB}/logs"
    for _ in range(STREAMS):
        stream = stack.enter_context(
            closing(streams.send(streams.build_request("GET", logs, params={"follow": "true"}), stream=True))
        )
        assert stream.status_code == 200, stream.read()


def main() -> None:
    with running(cluster=False, prefix="tj-bench-streams-") as plane, ExitStack() as stack:
        api = stack.enter_context(plane.api_client())
        install_crd(api)
        client.CoreV1Api(api).create_namespace(client.V1Namespace(metadata={"name": NAMESPACE}))
        client.CoreV1Api(api).create_namespaced_service_account(
            NAMESPACE, client.V1ServiceAccount(metadata={"name": "default"})
        )
        token = caller_token(api)
        silent_pod(api, stack.enter_context(silent_node(plane, api, plane.root)))
        url = stack.enter_context(serve(plane))
        rest = stack.enter_context(
            httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}", **SAME_SITE})
        )
        measure(rest)  # warm up: connections, the auth cache
        idle = measure(rest)
        start = time.perf_counter()
        open_streams(url, token, stack)
        print(f"opened {STREAMS} follow streams in {time.perf_counter() - start:.1f} s")
        loaded = measure(rest)
        report("GET /healthz", idle[0], loaded[0])
        report(
            "POST a job (TokenReview and SubjectAccessReview cached, create through the apiserver)", idle[1], loaded[1]
        )


if __name__ == "__main__":
    main()
