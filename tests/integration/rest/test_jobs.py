"""Jobs through the REST API: create from JSON and YAML (named, or by generateName), invalid manifests and those of
another kind, lists with selectors and pages, delete, suspend and resume, and the status watch."""

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import yaml
from kubernetes import client
from testbed.processes import poll_until
from tests.support.builders import claim_manifest
from tests.support.rest_api import (
    TIMEOUT,
    World,
    create,
    jobs_path,
    manifest,
    names,
)

from trainingjob.model import GROUP, PLURAL, VERSION

pytestmark = pytest.mark.envtest


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


def test_create_with_generate_name_returns_the_name_kubernetes_gave(world: World) -> None:
    job = manifest("unused")
    job["metadata"] = {"generateName": "sweep-", "labels": {"team": "vision"}}
    response = world.writer.post(jobs_path(world.home), json=job)
    assert response.status_code == 201, response.text
    name = response.json()["metadata"]["name"]
    assert name.startswith("sweep-") and len(name) == len("sweep-") + 5, name
    got = world.writer.get(jobs_path(world.home, name))  # from the cache, or read through while it is not there yet
    assert got.status_code == 200 and got.json()["metadata"]["labels"] == {"team": "vision"}, got.text
    other = world.writer.post(jobs_path(world.home), json=job)
    assert other.status_code == 201 and other.json()["metadata"]["name"] != name, other.text
    job["metadata"] = {"generateName": "Sweep_"}
    refused = world.writer.post(jobs_path(world.home), json=job)
    assert refused.status_code == 422 and "metadata.generateName must be" in refused.json()["message"], refused.text
    job["metadata"] = {"labels": {"team": "vision"}}
    nameless = world.writer.post(jobs_path(world.home), json=job)
    assert nameless.status_code == 422, nameless.text
    assert "metadata.name or metadata.generateName is required" in nameless.json()["message"]


def test_a_manifest_of_another_kind_is_named_as_such(world: World) -> None:
    """A claim (alone, or in a stream with a job) is refused saying what it is, not with the job's field errors."""
    as_yaml = {"Content-Type": "application/yaml"}
    claim = world.writer.post(jobs_path(world.home), content=yaml.safe_dump(claim_manifest()), headers=as_yaml)
    assert claim.status_code == 422, claim.text
    assert claim.json()["message"].startswith("the manifest is a PersistentVolumeClaim, not a TrainingJob: apply it")
    assert [f["field"] for f in claim.json()["fields"]] == ["kind"]
    both = yaml.safe_dump_all([claim_manifest(), manifest("with-a-claim")])
    streamed = world.writer.post(jobs_path(world.home), content=both, headers=as_yaml)
    assert streamed.status_code == 400, streamed.text
    assert "2 YAML documents (a PersistentVolumeClaim, a TrainingJob) where one is expected" in streamed.text


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


def test_a_job_shows_its_progress_and_result(world: World, admin: client.ApiClient) -> None:
    create(world, "reported")
    progress = {
        "step": 168,
        "totalSteps": 168,
        "percent": 100,
        "loss": 0.05,
        "metricsStep": 168,
        "metrics": {"accuracy": 0.97, "val/loss": 0.11},
        "estimatedCompletionTime": "2026-01-01T01:00:00Z",
    }
    result = {"step": 168, "totalSteps": 168, "metrics": {"accuracy": 0.97}, "durationSeconds": 52,
              "checkpoint": {"step": 160, "path": "/checkpoints/step-160", "time": "2026-01-01T00:59:00Z"}}  # fmt: skip
    status = {"phase": "Succeeded", "progress": progress, "result": result}
    client.CustomObjectsApi(admin).patch_namespaced_custom_object_status(
        GROUP, VERSION, world.home, PLURAL, "reported", {"status": status}
    )

    def shown() -> dict[str, Any] | None:  # the API reads from its cache, which follows the status shortly
        response = world.reader.get(jobs_path(world.home, "reported"))
        assert response.status_code == 200, response.text
        found: dict[str, Any] = response.json().get("status") or {}
        return found if "result" in found else None

    found = poll_until(shown, timeout=TIMEOUT, what="the status through the API")
    assert (found["progress"], found["result"]) == (progress, result)


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
