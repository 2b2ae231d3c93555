"""The REST API against a real kube-apiserver: TokenReview, SubjectAccessReview, the watch-fed cache, every route."""

import json
import os
import re
import signal
import socket
import ssl
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
import yaml
from kubernetes import client
from tests.builders import job_manifest
from tests.support.controlplane import ControlPlane
from tests.support.processes import Server, free_port, poll_until

from trainingjob.model import GROUP, PLURAL, VERSION
from trainingjob.naming import ATTEMPT_LABEL, INDEX_LABEL, JOB_LABEL, ROLE_LABEL
from trainingjob_api.app import create_app
from trainingjob_api.settings import ApiSettings

pytestmark = pytest.mark.envtest

ALL_VERBS = ["get", "list", "watch", "create", "update", "patch", "delete"]
READ_VERBS = ["get", "list", "watch"]
TIMEOUT = 30.0
OUTAGE_SECONDS = 5.0
AUDIENCE = "trainingjob-api"
STREAMERS, STREAMS_EACH = 10, 20  # 200 idle follow streams; 20 is the default bound per caller
# A kubelet's log endpoint and nothing more: every request gets 200 and one line, then silence until the apiserver
# hangs up. Without --kubelet-certificate-authority the apiserver does not verify a kubelet's serving certificate.
SILENT_KUBELET = """
import asyncio, ssl, sys

async def answer(reader, writer):
    await reader.readuntil(b"\\r\\n\\r\\n")
    writer.write(b"HTTP/1.1 200 OK\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n8\\r\\nstarted\\n\\r\\n")
    await writer.drain()
    await reader.read()

async def main(port, cert, key):
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    await (await asyncio.start_server(answer, "127.0.0.1", int(port), ssl=tls, backlog=1024)).serve_forever()

asyncio.run(main(*sys.argv[1:]))
"""
# What the API's own identity needs: jobs, pods and their logs, events, and the two review APIs.
SERVER_RULES = [
    client.V1PolicyRule(api_groups=[GROUP], resources=[PLURAL], verbs=ALL_VERBS),
    client.V1PolicyRule(api_groups=[""], resources=["pods", "events"], verbs=["get", "list"]),
    client.V1PolicyRule(api_groups=[""], resources=["pods/log"], verbs=["get"]),
    client.V1PolicyRule(api_groups=["authentication.k8s.io"], resources=["tokenreviews"], verbs=["create"]),
    client.V1PolicyRule(api_groups=["authorization.k8s.io"], resources=["subjectaccessreviews"], verbs=["create"]),
]


@dataclass(frozen=True)
class Api:
    """The API served on loopback, and the token of its own ServiceAccount (which must never leak)."""

    url: str
    server_token: str


def manifest(name: str, labels: dict[str, str] | None = None, replicas: int = 2) -> dict[str, Any]:
    return job_manifest(name, labels=labels, workers=replicas, trainer={"steps": 10})


def service_account(api: client.ApiClient, namespace: str, name: str, audience: str | None = AUDIENCE) -> str:
    """Create a ServiceAccount and return a token for it from the TokenRequest API, minted for the REST API's
    audience (or, with audience None, for the Kubernetes API's own)."""
    core = client.CoreV1Api(api)
    try:
        core.create_namespaced_service_account(namespace, client.V1ServiceAccount(metadata={"name": name}))
    except client.ApiException as error:
        if error.status != 409:
            raise
    audiences = [audience] if audience else []
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=audiences, expiration_seconds=3600)
    )
    return str(core.create_namespaced_service_account_token(name, namespace, request).status.token)


def grant(api: client.ApiClient, name: str, sa: tuple[str, str], rules: list[Any], namespace: str = "") -> None:
    """Bind `rules` to the ServiceAccount `sa` (namespace, name): a Role in `namespace`, else a ClusterRole."""
    rbac = client.RbacAuthorizationV1Api(api)
    subject = client.RbacV1Subject(kind="ServiceAccount", name=sa[1], namespace=sa[0])
    kind = "Role" if namespace else "ClusterRole"
    role_ref = client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind=kind, name=name)
    if namespace:
        rbac.create_namespaced_role(namespace, client.V1Role(metadata={"name": name}, rules=rules))
        binding = client.V1RoleBinding(metadata={"name": name}, role_ref=role_ref, subjects=[subject])
        rbac.create_namespaced_role_binding(namespace, binding)
    else:
        rbac.create_cluster_role(client.V1ClusterRole(metadata={"name": name}, rules=rules))
        binding = client.V1ClusterRoleBinding(metadata={"name": name}, role_ref=role_ref, subjects=[subject])
        rbac.create_cluster_role_binding(binding)


def token_kubeconfig(path: Path, plane: ControlPlane, token: str) -> Path:
    cluster = {"server": plane.server_url, "certificate-authority": str(plane.pki.cert)}
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "envtest", "cluster": cluster}],
        "users": [{"name": "api", "user": {"token": token}}],
        "contexts": [{"name": "api", "context": {"cluster": "envtest", "user": "api"}}],
        "current-context": "api",
    }
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.fixture(scope="module")
def admin(trainingjob_crd: ControlPlane) -> Iterator[client.ApiClient]:
    with trainingjob_crd.api_client() as api:
        yield api


@pytest.fixture(scope="module")
def api_server(trainingjob_crd: ControlPlane, admin: client.ApiClient, tmp_path_factory: Any) -> Iterator[Api]:
    """The app under uvicorn on a free loopback port, acting as its own ServiceAccount with least rights."""
    system = f"tj-api-system-{uuid.uuid4().hex[:6]}"
    client.CoreV1Api(admin).create_namespace(client.V1Namespace(metadata={"name": system}))
    token = service_account(admin, system, "trainingjob-api", audience=None)  # its own identity, for Kubernetes
    grant(admin, system, (system, "trainingjob-api"), SERVER_RULES)
    kubeconfig = token_kubeconfig(tmp_path_factory.mktemp("api") / "kubeconfig", trainingjob_crd, token)
    settings = ApiSettings(kubeconfig=kubeconfig, sse_keepalive_seconds=1.0)
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), host="127.0.0.1", port=free_port(), log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.config.port}"
    poll_until(lambda: httpx.get(f"{url}/readyz").status_code == 200, timeout=TIMEOUT, what="the API ready")
    yield Api(url, token)
    server.should_exit = True
    thread.join(TIMEOUT)
    client.CoreV1Api(admin).delete_namespace(system)


@dataclass(frozen=True)
class World:
    """Two namespaces and two callers: `writer` may do anything in `home` only, `reader` may read everywhere."""

    home: str
    other: str
    writer: httpx.Client
    reader: httpx.Client
    anonymous: httpx.Client


@pytest.fixture
def world(api_server: Api, admin: client.ApiClient, envtest_ns: str) -> Iterator[World]:
    other = f"{envtest_ns[:50]}-other"
    client.CoreV1Api(admin).create_namespace(client.V1Namespace(metadata={"name": other}))
    writer_rules = [
        client.V1PolicyRule(api_groups=[GROUP], resources=[PLURAL], verbs=ALL_VERBS),
        client.V1PolicyRule(api_groups=[""], resources=["events"], verbs=["list"]),
        client.V1PolicyRule(api_groups=[""], resources=["pods/log"], verbs=["get"]),
    ]
    grant(admin, "writer", (envtest_ns, "writer"), writer_rules, namespace=envtest_ns)
    grant(
        admin,
        f"{other}-reader",
        (other, "reader"),
        [client.V1PolicyRule(api_groups=[GROUP], resources=[PLURAL], verbs=READ_VERBS)],
    )
    clients = [
        httpx.Client(base_url=api_server.url, timeout=TIMEOUT, headers=headers)
        for headers in (
            {"Authorization": f"Bearer {service_account(admin, envtest_ns, 'writer')}"},
            {"Authorization": f"Bearer {service_account(admin, other, 'reader')}"},
            {},
        )
    ]
    yield World(envtest_ns, other, *clients)
    for each in clients:
        each.close()
    client.RbacAuthorizationV1Api(admin).delete_cluster_role_binding(f"{other}-reader")
    client.RbacAuthorizationV1Api(admin).delete_cluster_role(f"{other}-reader")
    client.CoreV1Api(admin).delete_namespace(other)


def jobs_path(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/trainingjobs" + (f"/{name}" if name else "")


def create(world: World, name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    response = world.writer.post(jobs_path(world.home), json=manifest(name, labels))
    assert response.status_code == 201, response.text
    return dict(response.json())


def names(response: httpx.Response) -> list[str]:
    assert response.status_code == 200, response.text
    return [item["metadata"]["name"] for item in response.json()["items"]]


def test_create_from_json_and_yaml_then_get(world: World) -> None:
    created = create(world, "from-json")
    assert created["spec"]["workers"]["replicas"] == 2
    assert created["spec"]["runPolicy"]["suspend"] is False  # camelCase, defaults filled by the model
    body = yaml.safe_dump(manifest("from-yaml"))
    response = world.writer.post(jobs_path(world.home), content=body, headers={"Content-Type": "application/yaml"})
    assert response.status_code == 201, response.text
    for name in ("from-json", "from-yaml"):
        got = world.writer.get(jobs_path(world.home, name))
        assert got.status_code == 200, got.text
        assert got.json()["metadata"]["namespace"] == world.home
        assert "managedFields" not in got.json()["metadata"]
    again = world.writer.post(jobs_path(world.home), json=manifest("from-json"))
    assert again.status_code == 409, again.text


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("replicas", 0, "spec.workers.replicas"),
        ("replicas", "two", "spec.workers.replicas"),
        ("replcas", 2, "spec.workers.replcas"),
    ],
    ids=["too-few", "not-a-number", "unknown-field"],
)
def test_invalid_manifest_is_422_naming_the_field(world: World, path: str, value: Any, field: str) -> None:
    job = manifest("invalid")
    job["spec"]["workers"] = {path: value}
    response = world.writer.post(jobs_path(world.home), json=job)
    assert response.status_code == 422, response.text
    assert field in [f["field"] for f in response.json()["fields"]]
    assert field in response.json()["message"]


def test_list_with_label_selector_and_pages(world: World) -> None:
    for index in range(5):
        create(world, f"job-{index}", {"team": "nlp" if index % 2 else "vision"})

    def five_listed() -> list[str] | None:
        found = names(world.writer.get(jobs_path(world.home)))
        return found if len(found) == 5 else None

    everything = poll_until(five_listed, timeout=TIMEOUT, what="5 jobs in the cache")
    assert everything == [f"job-{index}" for index in range(5)]
    assert names(world.writer.get(jobs_path(world.home), params={"labelSelector": "team=nlp"})) == ["job-1", "job-3"]
    selector = "team in (vision),!missing"
    assert names(world.writer.get(jobs_path(world.home), params={"labelSelector": selector})) == [
        "job-0",
        "job-2",
        "job-4",
    ]
    bad = world.writer.get(jobs_path(world.home), params={"labelSelector": "team in (a"})
    assert bad.status_code == 422
    pages, token = [], None
    while True:
        params = {"limit": 2, **({"continue": token} if token else {})}
        page = world.writer.get(jobs_path(world.home), params=params)
        pages.append(names(page))
        token = page.json()["metadata"]["continue"]
        if token is None:
            break
    assert pages == [["job-0", "job-1"], ["job-2", "job-3"], ["job-4"]]


def test_list_across_namespaces_shows_only_what_the_caller_may_list(world: World, admin: client.ApiClient) -> None:
    create(world, "mine")
    client.CustomObjectsApi(admin).create_namespaced_custom_object(
        GROUP, VERSION, world.other, PLURAL, manifest("theirs")
    )

    def listed(caller: httpx.Client) -> set[tuple[str, str]]:
        response = caller.get("/api/v1/trainingjobs")
        assert response.status_code == 200, response.text
        return {(i["metadata"]["namespace"], i["metadata"]["name"]) for i in response.json()["items"]}

    def reader_sees_both() -> bool:
        return {(world.home, "mine"), (world.other, "theirs")} <= listed(world.reader)

    poll_until(reader_sees_both, timeout=TIMEOUT, what="the reader to see the jobs of both namespaces")
    assert {namespace for namespace, _ in listed(world.writer)} == {world.home}


def test_authentication_is_required(world: World, api_server: Api) -> None:
    missing = world.anonymous.get(jobs_path(world.home))
    assert missing.status_code == 401
    assert missing.headers["WWW-Authenticate"] == "Bearer"
    real = world.writer.headers["Authorization"].removeprefix("Bearer ")
    forged = real[:-8] + ("A" * 8 if not real.endswith("A" * 8) else "B" * 8)  # a signature nobody made
    for token in (forged, "not-a-token"):
        response = world.anonymous.get(jobs_path(world.home), headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 401, response.text
        assert "TokenReview" in response.json()["message"]


def test_tokens_are_minted_for_the_api_and_cannot_be_replayed_against_kubernetes(
    world: World, admin: client.ApiClient, trainingjob_crd: ControlPlane
) -> None:
    kubernetes_token = service_account(admin, world.home, "writer", audience=None)
    refused = world.anonymous.get(jobs_path(world.home), headers={"Authorization": f"Bearer {kubernetes_token}"})
    assert refused.status_code == 401 and f"--audience {AUDIENCE}" in refused.json()["message"]
    ours = service_account(admin, world.home, "writer")
    assert world.anonymous.get(jobs_path(world.home), headers={"Authorization": f"Bearer {ours}"}).status_code == 200
    replayed = httpx.get(
        f"{trainingjob_crd.server_url}/api/v1/namespaces/{world.home}/pods",
        headers={"Authorization": f"Bearer {ours}"},
        verify=ssl.create_default_context(cafile=str(trainingjob_crd.pki.cert)),
    )
    assert replayed.status_code == 401  # what the API saw is worthless to the Kubernetes API


def test_a_failed_ranks_log_lines_need_the_right_to_read_pod_logs(world: World, admin: client.ApiClient) -> None:
    create(world, "leaky")
    failure = {
        "pod": "leaky-worker-0-1",
        "attempt": 1,
        "failureClass": "Retryable",
        "exitCode": 1,
        "reason": "Error",
        "logTail": "HF_TOKEN=hf_secret",
        "time": "2026-11-22T10:00:00Z",
    }
    custom = client.CustomObjectsApi(admin)
    custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, world.home, PLURAL, "leaky", {"status": {"lastFailure": failure}}
    )
    poll_until(
        lambda: world.reader.get(jobs_path(world.home, "leaky")).json().get("status"), timeout=TIMEOUT, what="status"
    )
    for caller in (world.reader, world.writer):
        for body in (caller.get(jobs_path(world.home, "leaky")).json(), caller.get(jobs_path(world.home)).json()):
            assert "hf_secret" not in json.dumps(body)
    assert world.reader.get(jobs_path(world.home, "leaky") + "/failure").status_code == 403  # no pods/log
    shown = world.writer.get(jobs_path(world.home, "leaky") + "/failure")
    assert shown.status_code == 200 and shown.json()["lastFailure"]["logTail"] == "HF_TOKEN=hf_secret"


def test_forbidden_names_verb_resource_and_namespace(world: World) -> None:
    response = world.writer.get(jobs_path(world.other))
    assert response.status_code == 403, response.text
    message = response.json()["message"]
    assert 'cannot list resource "trainingjobs"' in message
    assert f'in the namespace "{world.other}"' in message
    assert f"system:serviceaccount:{world.home}:writer" in message
    denied = world.reader.post(jobs_path(world.other), json=manifest("nope"))
    assert denied.status_code == 403
    assert "cannot create" in denied.json()["message"]
    assert world.reader.delete(jobs_path(world.home, "anything")).status_code == 403


def test_delete(world: World) -> None:
    create(world, "doomed")
    response = world.writer.delete(jobs_path(world.home, "doomed"))
    assert response.status_code == 200, response.text
    assert response.json() == {"namespace": world.home, "name": "doomed", "status": "Deleting"}
    poll_until(
        lambda: world.writer.get(jobs_path(world.home, "doomed")).status_code == 404, timeout=TIMEOUT, what="gone"
    )
    assert world.writer.delete(jobs_path(world.home, "doomed")).status_code == 404


def test_suspend_and_resume(world: World) -> None:
    create(world, "pausable")
    suspended = world.writer.post(jobs_path(world.home, "pausable") + "/suspend")
    assert suspended.status_code == 200, suspended.text
    assert suspended.json()["spec"]["runPolicy"]["suspend"] is True
    resumed = world.writer.post(jobs_path(world.home, "pausable") + "/resume")
    assert resumed.json()["spec"]["runPolicy"]["suspend"] is False
    assert world.writer.post(jobs_path(world.home, "absent") + "/suspend").status_code == 404


def sse_events(lines: Iterator[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(event, data) pairs of a server-sent-events stream; comments (keepalives) skipped."""
    event = ""
    for line in lines:
        if line.startswith("event: "):
            event = line.removeprefix("event: ")
        elif line.startswith("data: "):
            yield event, json.loads(line.removeprefix("data: "))


def test_watch_streams_status_changes(world: World, admin: client.ApiClient) -> None:
    create(world, "watched")
    jobs = client.CustomObjectsApi(admin)
    with world.writer.stream("GET", jobs_path(world.home, "watched") + "/watch", timeout=TIMEOUT) as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        events = sse_events(stream.iter_lines())
        kind, first = next(events)
        assert kind == "status"
        assert first["metadata"]["name"] == "watched"
        patch = {"status": {"phase": "Running", "attempt": 1}}
        jobs.patch_namespaced_custom_object_status(GROUP, VERSION, world.home, PLURAL, "watched", patch)
        kind, changed = next(events)
        assert (kind, changed["status"]["phase"], changed["status"]["attempt"]) == ("status", "Running", 1)
        jobs.delete_namespaced_custom_object(GROUP, VERSION, world.home, PLURAL, "watched")
        assert next(events)[0] == "deleted"


def test_watch_streams_count_against_the_callers_bound(world: World) -> None:
    create(world, "watched")
    url = jobs_path(world.home, "watched") + "/watch"
    with ExitStack() as stack:
        for _ in range(20):  # ApiSettings.max_log_streams_per_caller
            opened = stack.enter_context(world.writer.stream("GET", url))
            assert opened.status_code == 200
        with world.writer.stream("GET", url) as refused:  # a stream: an unbounded watch would never end
            assert refused.status_code == 429
            assert "streams (followed logs, watches)" in json.loads(refused.read())["message"]


def test_events_of_a_job(world: World, admin: client.ApiClient) -> None:
    job = create(world, "eventful")
    involved = client.V1ObjectReference(
        api_version=f"{GROUP}/{VERSION}", kind="TrainingJob", name="eventful", namespace=world.home,
        uid=job["metadata"]["uid"],
    )  # fmt: skip
    event = client.CoreV1Event(
        metadata={"name": "eventful.1"}, involved_object=involved, reason="WorkerFailed", type="Warning",
        message="worker-1 exited with code 1.", source=client.V1EventSource(component="trainingjob-operator"),
    )  # fmt: skip
    client.CoreV1Api(admin).create_namespaced_event(world.home, event)
    response = world.writer.get(jobs_path(world.home, "eventful") + "/events")
    assert response.status_code == 200, response.text
    [found] = response.json()["items"]
    assert found["reason"] == "WorkerFailed"
    assert found["source"] == "trainingjob-operator"
    assert world.reader.get(jobs_path(world.home, "eventful") + "/events").status_code == 403


def pod_of(job: str, attempt: int, node: str | None = None) -> client.V1Pod:
    """Worker 0's pod of `attempt`, as the operator would label it; no kubelet ever runs it."""
    labels = {JOB_LABEL: job, ROLE_LABEL: "worker", INDEX_LABEL: "0", ATTEMPT_LABEL: str(attempt)}
    container = client.V1Container(name="trainer", image="trainer:dev")
    spec = client.V1PodSpec(containers=[container], node_name=node, automount_service_account_token=False)
    return client.V1Pod(metadata=client.V1ObjectMeta(name=f"{job}-worker-0-{attempt}", labels=labels), spec=spec)


def test_logs_without_a_kubelet_fail_clearly(world: World, admin: client.ApiClient) -> None:
    create(world, "logged")
    logs = jobs_path(world.home, "logged") + "/logs"
    missing = world.writer.get(logs, params={"replica": "worker-0"})
    assert missing.status_code == 404, missing.text
    assert "replica worker-0" in missing.json()["message"]
    core = client.CoreV1Api(admin)
    core.create_namespaced_pod(world.home, pod_of("logged", attempt=1))  # envtest has no scheduler
    pending = world.writer.get(logs, params={"replica": "worker-0"})
    assert pending.status_code == 404, pending.text
    assert 'pod "logged-worker-0-1" has no logs yet: it is not scheduled' in pending.json()["message"]
    core.create_namespaced_pod(world.home, pod_of("logged", attempt=2, node="gpu-node-0"))  # no kubelet there
    unreachable = world.writer.get(logs, params={"replica": "worker-0"})
    assert unreachable.status_code == 502, unreachable.text
    assert 'the logs of pod "logged-worker-0-2" are not available from Kubernetes' in unreachable.json()["message"]
    assert world.writer.get(logs, params={"replica": "chief-0"}).status_code == 422


def test_health_metrics_and_docs(world: World) -> None:
    for path in ("/healthz", "/readyz", "/docs", "/openapi.json"):
        assert world.anonymous.get(path).status_code == 200, path
    assert world.anonymous.get("/readyz").json()["status"] == "ok"
    world.writer.get(jobs_path(world.home))
    metrics = world.anonymous.get("/metrics").text
    assert 'trainingjob_api_requests_total{method="GET",route="/api/v1/namespaces/{namespace}/trainingjobs"' in metrics
    assert "trainingjob_api_cache_synced 1.0" in metrics


def test_the_docs_load_nothing_from_outside(world: World) -> None:
    """An air-gapped cluster reaches no CDN: every script and style of /docs is served by the API."""
    page = world.anonymous.get("/docs").text
    loaded = re.findall(r"""(?:src|href)=["']([^"']+)""", page) + re.findall(r"url: ?'([^']+)'", page)
    assert loaded and all(url.startswith("/") for url in loaded), loaded
    for url in loaded:
        assert world.anonymous.get(url).status_code == 200, url
    assert "SwaggerUIBundle" in world.anonymous.get("/docs-assets/swagger-ui-bundle.js").text


def test_errors_never_carry_the_servers_credentials(world: World, api_server: Api) -> None:
    requests = [
        world.anonymous.get(jobs_path(world.home)),
        world.anonymous.get(jobs_path(world.home), headers={"Authorization": "Bearer forged"}),
        world.writer.get(jobs_path(world.other)),
        world.writer.get(jobs_path(world.home, "absent")),
        world.writer.post(jobs_path(world.home), json=manifest("x", replicas=0)),
        world.writer.post(jobs_path(world.home), content=b"{", headers={"Content-Type": "application/json"}),
        world.writer.post(jobs_path(world.home), content=b"a: [", headers={"Content-Type": "application/yaml"}),
        world.writer.get(jobs_path(world.home, "absent") + "/logs"),
    ]
    assert sorted({r.status_code for r in requests}) == [400, 401, 403, 404, 422]
    for response in requests:
        assert api_server.server_token not in response.text
        assert api_server.server_token not in str(response.headers)
        assert "BEGIN" not in response.text


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_a_finished_job_cannot_be_suspended_or_resumed(world: World, admin: client.ApiClient, phase: str) -> None:
    create(world, "finished")
    jobs = client.CustomObjectsApi(admin)
    jobs.patch_namespaced_custom_object_status(
        GROUP, VERSION, world.home, PLURAL, "finished", {"status": {"phase": phase}}
    )
    for action, done in (("suspend", "suspended"), ("resume", "resumed")):
        response = world.writer.post(jobs_path(world.home, "finished") + f"/{action}")
        assert response.status_code == 409, response.text
        assert response.json()["message"] == (
            f'trainingjob "finished" in namespace "{world.home}" is finished (phase {phase}): it cannot be {done}'
        )
    stored = jobs.get_namespaced_custom_object(GROUP, VERSION, world.home, PLURAL, "finished")
    assert stored["spec"]["runPolicy"]["suspend"] is False  # refused, not patched and then reported


def test_an_apiserver_outage_is_503_and_readyz_follows_it(world: World, trainingjob_crd: ControlPlane) -> None:
    outage = threading.Thread(target=trainingjob_crd.restart_apiserver, args=(OUTAGE_SECONDS,))
    outage.start()
    try:
        stale = poll_until(lambda: readyz(world, "stale"), timeout=TIMEOUT, what="/readyz to say the cache is stale")
        assert stale.status_code == 503
        assert stale.json()["message"] == (
            "the job cache lost its watch on Kubernetes; it relists once Kubernetes answers"
        )

        def refused() -> httpx.Response | None:
            response = world.writer.post(jobs_path(world.home), json=manifest(f"outage-{uuid.uuid4().hex[:6]}"))
            return response if response.status_code == 503 else None

        failed = poll_until(refused, timeout=TIMEOUT, what="a create to answer 503")
        assert failed.json()["message"].startswith("the Kubernetes API server is unreachable: "), failed.text
    finally:
        outage.join()
    poll_until(lambda: readyz(world, "ok"), timeout=TIMEOUT, what="/readyz 200 again")
    create(world, "after-the-outage")


def readyz(world: World, status: str) -> httpx.Response | None:
    response = world.anonymous.get("/readyz")
    return response if response.json()["status"] == status else None


def test_readyz_fails_while_the_apiserver_does_not_answer(world: World, trainingjob_crd: ControlPlane) -> None:
    (apiserver,) = [server for server in trainingjob_crd.servers if server.name == "kube-apiserver"]
    os.kill(apiserver.process.pid, signal.SIGSTOP)  # connections stay open, nothing answers: the watch looks fine
    try:
        hung = poll_until(lambda: readyz(world, "unreachable"), timeout=TIMEOUT, what="/readyz to fail")
        assert hung.status_code == 503
        assert hung.json()["message"] == "the Kubernetes API server is unreachable: it did not answer in time"
    finally:
        os.kill(apiserver.process.pid, signal.SIGCONT)
    poll_until(lambda: readyz(world, "ok"), timeout=TIMEOUT, what="/readyz 200 again")


def accepts(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=1):
        return True


@pytest.fixture
def silent_node(trainingjob_crd: ControlPlane, admin: client.ApiClient, tmp_path: Path) -> Iterator[str]:
    """A Node whose kubelet serves every pod's log as one line, then nothing: follow streams stay open and idle."""
    pair, port = trainingjob_crd.pki.issue("kubelet", "kubelet", server=True), free_port()
    kubelet = Server(
        "kubelet", [sys.executable, "-c", SILENT_KUBELET, str(port), str(pair.cert), str(pair.key)], tmp_path
    )
    node, nodes = f"silent-{uuid.uuid4().hex[:6]}", client.CoreV1Api(admin)
    status = {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
              "daemonEndpoints": {"kubeletEndpoint": {"Port": port}}}  # fmt: skip
    try:
        kubelet.wait_ready(lambda: accepts(port), TIMEOUT)
        nodes.create_node({"metadata": {"name": node}, "status": status})
        try:
            yield node
        finally:
            nodes.delete_node(node)
    finally:
        kubelet.stop()


def callers(world: World, admin: client.ApiClient, count: int) -> list[httpx.Client]:
    """`count` more ServiceAccounts with the writer's role in the home namespace, as API clients."""
    names = [f"caller-{index}" for index in range(count)]
    subjects = [client.RbacV1Subject(kind="ServiceAccount", name=name, namespace=world.home) for name in names]
    ref = client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name="writer")
    binding = client.V1RoleBinding(metadata={"name": "callers"}, role_ref=ref, subjects=subjects)
    client.RbacAuthorizationV1Api(admin).create_namespaced_role_binding(world.home, binding)
    return [
        httpx.Client(base_url=world.writer.base_url, timeout=TIMEOUT, headers={"Authorization": f"Bearer {token}"})
        for token in (service_account(admin, world.home, name) for name in names)
    ]


def follow(caller: httpx.Client, path: str) -> httpx.Response:
    """A log stream, open once its headers are in; the caller closes it."""
    return caller.send(caller.build_request("GET", path, params={"follow": "true"}), stream=True)


def log_streams(world: World) -> float:
    metrics = world.anonymous.get("/metrics").text
    return float(
        next(line.split()[1] for line in metrics.splitlines() if line.startswith("trainingjob_api_log_streams"))
    )


def test_idle_follow_streams_hold_no_thread_and_are_bounded(
    world: World, admin: client.ApiClient, silent_node: str
) -> None:
    create(world, "streamed")
    client.CoreV1Api(admin).create_namespaced_pod(world.home, pod_of("streamed", attempt=1, node=silent_node))
    logs = jobs_path(world.home, "streamed") + "/logs"
    with ExitStack() as stack:
        streamers = [stack.enter_context(each) for each in callers(world, admin, STREAMERS)]
        streams = [stack.enter_context(closing(follow(each, logs))) for each in streamers for _ in range(STREAMS_EACH)]
        assert {stream.status_code for stream in streams} == {200}
        assert log_streams(world) == STREAMERS * STREAMS_EACH
        start = time.perf_counter()
        assert world.anonymous.get("/healthz").status_code == 200
        assert world.writer.post(jobs_path(world.home), json=manifest("while-200-streams")).status_code == 201
        assert time.perf_counter() - start < 2.0
        with closing(follow(streamers[0], logs)) as refused:
            refused.read()
            assert refused.status_code == 429, refused.text
            assert f"holds {STREAMS_EACH} streams (followed logs, watches) already" in refused.json()["message"]
        streams[0].close()  # the caller leaves: its slot is freed

        def reopened() -> bool:
            with closing(follow(streamers[0], logs)) as again:
                return again.status_code == 200 and next(again.iter_raw()) == b"started\n"  # relayed as it comes

        poll_until(reopened, timeout=TIMEOUT, what="a freed slot")
    poll_until(lambda: log_streams(world) == 0, timeout=TIMEOUT, what="every stream closed when its caller left")
