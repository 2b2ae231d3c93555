"""The dashboard's read endpoints through the REST API, against the real apiserver and its RBAC: who am I, job
summaries (pages, filters, counts, the change stream), the cluster view, a job's access and pods. A caller sees
nothing of a namespace where they may not list jobs."""

import base64
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from kubernetes import client
from testbed.processes import poll_until
from testbed.silent_kubelet import pod_of
from tests.support.rest_api import TIMEOUT, World, grant, jobs_path, manifest, service_account

from trainingjob.model import GROUP, PLURAL, VERSION
from trainingjob_sdk.rest import SAME_SITE

pytestmark = pytest.mark.envtest
SUMMARIES = "/api/v1/jobsummaries"


def create_in(admin: client.ApiClient, namespace: str, name: str, **spec: Any) -> None:
    """A job created directly in Kubernetes (the caller under test need not be allowed to)."""
    body = manifest(name, labels={"team": "nlp" if "bert" in name else "vision"})
    body["spec"].update(spec)
    client.CustomObjectsApi(admin).create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)


def set_status(admin: client.ApiClient, namespace: str, name: str, status: dict[str, Any]) -> None:
    client.CustomObjectsApi(admin).patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, PLURAL, name, {"status": status}
    )


def summaries(caller: httpx.Client, **params: Any) -> dict[str, Any]:
    response = caller.get(SUMMARIES, params=params)
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def keys(page: dict[str, Any]) -> list[str]:
    return [f"{item['namespace']}/{item['name']}" for item in page["items"]]


def until(caller: httpx.Client, check: Callable[[dict[str, Any]], bool], **params: Any) -> dict[str, Any]:
    """The summaries once `check` holds of them: the API's cache follows Kubernetes shortly."""
    return poll_until(
        lambda: page if check(page := summaries(caller, **params)) else None, timeout=TIMEOUT, what=f"{params}"
    )


def test_whoami_names_the_tokens_user(world: World) -> None:
    me = world.writer.get("/api/v1/whoami")
    assert me.status_code == 200, me.text
    assert me.json()["username"] == f"system:serviceaccount:{world.home}:writer"
    assert "system:serviceaccounts" in me.json()["groups"]
    assert world.anonymous.get("/api/v1/whoami").status_code == 401


def test_a_caller_sees_no_job_of_a_namespace_they_may_not_list(world: World, admin: client.ApiClient) -> None:
    create_in(admin, world.home, "mine", workers={"replicas": 2, "resources": {"limits": {"nvidia.com/gpu": 2}}})
    create_in(admin, world.other, "secret", workers={"replicas": 8, "resources": {"limits": {"nvidia.com/gpu": 4}}})
    set_status(admin, world.home, "mine", {"phase": "Running"})
    set_status(admin, world.other, "secret", {"phase": "Running"})
    for namespace in (world.home, world.other):
        until(world.reader, lambda page: page["phases"]["Running"] == 1, namespace=namespace)
    everything = summaries(world.writer)
    assert keys(everything) == [f"{world.home}/mine"]
    assert (everything["total"], everything["items"][0]["gpus"]) == (1, 4)
    assert world.writer.get(SUMMARIES, params={"namespace": world.other}).status_code == 403
    view = world.writer.get("/api/v1/cluster")
    assert view.status_code == 200, view.text
    assert (view.json()["jobs"], view.json()["gpus"]["running"]) == (1, 4)
    assert world.writer.get("/api/v1/cluster", params={"namespace": world.other}).status_code == 403
    assert f"{world.other}/secret" in keys(summaries(world.reader))  # one who may list there sees it
    mine, theirs = (
        world.reader.get("/api/v1/cluster", params={"namespace": ns}).json() for ns in (world.home, world.other)
    )
    assert (mine["gpus"]["running"], theirs["gpus"]["running"]) == (4, 32)
    for path in (SUMMARIES, "/api/v1/cluster", f"{SUMMARIES}/watch"):
        assert world.anonymous.get(path).status_code == 401


def test_pages_filters_and_counts(world: World, admin: client.ApiClient) -> None:
    for name in ("bert-a", "bert-b", "bert-c", "resnet-a", "resnet-b"):
        create_in(admin, world.home, name)
    set_status(admin, world.home, "bert-b", {"phase": "Failed"})
    set_status(admin, world.home, "resnet-a", {"phase": "Running", "attempt": 2})
    until(world.writer, lambda page: (page["total"], page["phases"]["Failed"], page["phases"]["Running"]) == (5, 1, 1))
    seen, token, pages = [], None, 0
    while True:
        page = summaries(world.writer, namespace=world.home, limit=2, **({"continue": token} if token else {}))
        assert page["total"] == 5
        assert page["phases"] == {"Pending": 3, "Running": 1, "Restarting": 0, "Suspended": 0, "Succeeded": 0,
                                  "Failed": 1}  # fmt: skip
        seen += [item["name"] for item in page["items"]]
        pages, token = pages + 1, page["continue"]
        if token is None:
            break
    assert (seen, pages) == (["bert-a", "bert-b", "bert-c", "resnet-a", "resnet-b"], 3)
    nlp = summaries(world.writer, labelSelector="team=nlp", search="-b")
    assert (keys(nlp), nlp["total"], nlp["phases"]["Failed"]) == ([f"{world.home}/bert-b"], 1, 1)
    running = summaries(world.writer, phase="Running")
    assert (keys(running), running["total"], running["phases"]["Pending"]) == ([f"{world.home}/resnet-a"], 1, 3)
    assert running["items"][0]["attempt"] == 2
    assert summaries(world.writer, search="gpt") == {
        "items": [], "continue": None, "total": 0, "phases": dict.fromkeys(page["phases"], 0),
    }  # fmt: skip


@pytest.mark.parametrize(
    "params",
    [
        {"limit": 0}, {"limit": -1}, {"limit": "ten"}, {"limit": 10**6}, {"limit": 10**30}, {"phase": "Exploded"},
        {"phase": ""}, {"namespace": "Not_A_Namespace"}, {"namespace": "a" * 64}, {"namespace": "../kube-system"},
        {"labelSelector": "!!"}, {"labelSelector": "team in (nlp"}, {"labelSelector": "a=" + "b" * 64},
        {"continue": "garbage"}, {"continue": "bnVsbA=="}, {"continue": "%%%"}, {"search": "x" * 254},
        {"continue": base64.urlsafe_b64encode(b"[" * 1500).decode()},
    ],
    ids=[
        "limit-0", "limit-negative", "limit-text", "limit-over-max", "limit-huge", "phase-unknown", "phase-empty",
        "namespace-invalid", "namespace-too-long", "namespace-path", "selector-garbage", "selector-unclosed",
        "selector-value-too-long", "continue-garbage", "continue-null", "continue-not-base64", "search-too-long",
        "continue-nested-too-deep",
    ],
)  # fmt: skip
def test_hostile_query_values_are_422(world: World, params: dict[str, Any]) -> None:
    response = world.reader.get(SUMMARIES, params=params)
    assert response.status_code == 422, response.text
    assert response.json()["status"] == 422  # the API's error shape, not a crash
    if "namespace" in params:
        assert world.reader.get("/api/v1/cluster", params=params).status_code == 422
        assert world.reader.get(f"{SUMMARIES}/watch", params=params).status_code == 422


def test_access_follows_the_callers_rights(world: World, admin: client.ApiClient) -> None:
    create_in(admin, world.home, "guarded")
    path = jobs_path(world.home, "guarded") + "/access"
    writer, reader = world.writer.get(path), world.reader.get(path)
    assert (writer.status_code, reader.status_code) == (200, 200), (writer.text, reader.text)
    assert writer.json() == {"get": True, "patch": True, "delete": True, "logs": True, "events": True, "pods": False}
    assert reader.json() == {"get": True, "patch": False, "delete": False, "logs": False, "events": False,
                             "pods": False}  # fmt: skip
    assert world.anonymous.get(path).status_code == 401
    assert world.reader.get(jobs_path("Bad_NS", "guarded") + "/access").status_code == 422


def test_rights_on_one_job_by_name_enable_its_buttons_and_its_endpoints(world: World, admin: client.ApiClient) -> None:
    """RBAC with resourceNames: patch on one job only. The access endpoint and suspend ask the same question."""
    for name in ("mine", "theirs"):
        create_in(admin, world.home, name)
    rule = client.V1PolicyRule(api_groups=[GROUP], resources=[PLURAL], verbs=["get", "patch"], resource_names=["mine"])
    grant(admin, "one-job", (world.home, "one-job"), [rule], namespace=world.home)
    headers = {"Authorization": f"Bearer {service_account(admin, world.home, 'one-job')}", **SAME_SITE}
    with httpx.Client(base_url=str(world.writer.base_url), timeout=TIMEOUT, headers=headers) as caller:
        for name, allowed in (("mine", True), ("theirs", False)):
            access = caller.get(jobs_path(world.home, name) + "/access").json()
            assert (access["get"], access["patch"]) == (allowed, allowed), (name, access)
            suspended = caller.post(jobs_path(world.home, name) + "/suspend")
            assert suspended.status_code == (200 if allowed else 403), (name, suspended.text)


def test_pods_of_a_job_newest_attempt_first(world: World, admin: client.ApiClient) -> None:
    create_in(admin, world.home, "podded")
    core = client.CoreV1Api(admin)
    for attempt in (1, 2):
        core.create_namespaced_pod(world.home, pod_of("podded", attempt=attempt, node="gpu-node-0"))
    core.create_namespaced_pod(world.home, pod_of("someone-else", attempt=5))
    path = jobs_path(world.home, "podded") + "/pods"
    assert world.writer.get(path).status_code == 403  # the writer may not list pods
    pod_rules = [client.V1PolicyRule(api_groups=[""], resources=["pods"], verbs=["list"])]
    grant(admin, "pod-lister", (world.home, "pod-lister"), pod_rules, namespace=world.home)
    token = service_account(admin, world.home, "pod-lister")
    with httpx.Client(base_url=world.writer.base_url, headers={"Authorization": f"Bearer {token}"}) as lister:
        response = lister.get(path)
        too_long = lister.get(jobs_path(world.home, "a" * 100) + "/pods")  # no label value: Kubernetes says 400
        assert too_long.status_code == 422, too_long.text
        assert lister.get(jobs_path(world.home, "nothing-here") + "/pods").json() == {"items": []}
    assert response.status_code == 200, response.text
    rows = response.json()["items"]
    assert [(r["name"], r["attempt"], r["role"], r["index"], r["node"]) for r in rows] == [
        ("podded-worker-0-2", 2, "worker", 0, "gpu-node-0"), ("podded-worker-0-1", 1, "worker", 0, "gpu-node-0"),
    ]  # fmt: skip


def events(stream: httpx.Response, deadline: float) -> Iterator[tuple[str, dict[str, Any]]]:
    """(event, data) of a summary stream until `deadline`; its keepalives (every second) let the deadline pass."""
    event = ""
    for line in stream.iter_lines():
        assert time.monotonic() < deadline, "the stream did not deliver in time"
        if line.startswith("event: "):
            event = line.removeprefix("event: ")
        elif line.startswith("data: "):
            yield event, json.loads(line.removeprefix("data: "))


def confined(found: Iterator[tuple[str, dict[str, Any]]], namespace: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The events, each checked to be about a job of `namespace`."""
    for kind, data in found:
        assert data["namespace"] == namespace, f"an event from a namespace the caller may not list: {data}"
        yield kind, data


def next_about(found: Iterator[tuple[str, dict[str, Any]]], name: str) -> tuple[str, dict[str, Any]]:
    """The next event about the job `name`; events about jobs of other tests are passed over."""
    return next((kind, data) for kind, data in found if data["name"] == name)


def test_the_summary_stream_shows_changes_in_listable_namespaces_only(world: World, admin: client.ApiClient) -> None:
    deadline = time.monotonic() + 2 * TIMEOUT
    url = f"{SUMMARIES}/watch"
    with world.writer.stream("GET", url) as mine, world.reader.stream("GET", url) as everyone:
        assert (mine.status_code, everyone.status_code) == (200, 200)
        assert mine.headers["content-type"].startswith("text/event-stream")
        seen_by_writer, seen_by_reader = confined(events(mine, deadline), world.home), events(everyone, deadline)
        create_in(admin, world.other, "hidden")  # the writer may not list jobs there
        set_status(admin, world.other, "hidden", {"phase": "Running"})
        create_in(admin, world.home, "streamed")
        assert next_about(seen_by_reader, "hidden")[1]["namespace"] == world.other  # it was in the cache first
        kind, added = next_about(seen_by_writer, "streamed")  # the events about "hidden" came before: not shown
        assert (kind, added["namespace"], added["phase"]) == ("summary", world.home, "Pending")
        progress = {"step": 30, "totalSteps": 100, "percent": 30.0, "loss": 0.7}
        set_status(admin, world.home, "streamed", {"phase": "Running", "attempt": 1, "progress": progress})
        kind, running = next_about(seen_by_writer, "streamed")
        assert (kind, running["phase"], running["step"], running["percent"]) == ("summary", "Running", 30, 30.0)
        client.CustomObjectsApi(admin).delete_namespaced_custom_object(GROUP, VERSION, world.home, PLURAL, "streamed")
        assert next_about(seen_by_writer, "streamed") == ("deleted", {"namespace": world.home, "name": "streamed"})
        client.CustomObjectsApi(admin).delete_namespaced_custom_object(GROUP, VERSION, world.other, PLURAL, "hidden")
        assert next_about(seen_by_reader, "hidden")[0] == "summary"  # Running
        assert next_about(seen_by_reader, "hidden")[0] == "deleted"
    with world.writer.stream("GET", url, params={"namespace": world.other}) as refused:
        assert refused.status_code == 403
