"""A job's timeline through the REST API and tjctl: its history as the operator wrote it, its pods for a caller
who may list them, and the same as a Chrome trace."""

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from kubernetes import client
from testbed.processes import poll_until
from testbed.silent_kubelet import pod_of
from tests.support.cli import tjctl
from tests.support.rest_api import Api, World, create, grant, jobs_path

from trainingjob.model import GROUP, PLURAL, VERSION

pytestmark = pytest.mark.envtest


def _history(start: datetime) -> dict[str, object]:
    def at(seconds: int) -> str:
        return (start + timedelta(seconds=seconds)).isoformat()

    return {
        "phase": "Running",
        "attempt": 2,
        "history": {
            "attempts": [
                {"attempt": 1, "startTime": at(0), "podsTime": at(1), "runningTime": at(5), "endTime": at(30),
                 "outcome": "Failed", "reason": "OOMKilled"},
                {"attempt": 2, "startTime": at(30), "podsTime": at(40), "runningTime": at(45), "resumedFromStep": 100},
            ],
            "failures": [{"time": at(30), "attempt": 1, "pod": "timed-worker-1-1", "failureClass": "OOMKilled",
                          "exitCode": 137, "reason": "OOMKilled"}],
            "checkpoints": [{"step": 100, "path": "/checkpoints/step-100", "time": at(20)}],
            "refusals": [{"pod": "timed-worker-1-2", "attempt": 2, "since": at(41), "time": at(44), "count": 4,
                          "node": "n3", "reason": "OutOfnvidia.com/gpu"}],
        },
    }  # fmt: skip


def test_the_timeline_shows_attempts_failures_and_pods(world: World, admin: client.ApiClient, api_server: Api) -> None:
    job = create(world, "timed")
    start = datetime.fromisoformat(job["metadata"]["creationTimestamp"]) - timedelta(seconds=60)  # all in the past
    custom = client.CustomObjectsApi(admin)
    custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, world.home, PLURAL, "timed", {"status": _history(start)}
    )
    client.CoreV1Api(admin).create_namespaced_pod(world.home, pod_of("timed", 2))
    path = jobs_path(world.home, "timed") + "/timeline"

    found = world.writer.get(path)  # the writer may not list pods: no pod rows, the rest is there
    assert found.status_code == 200, found.text
    body = found.json()
    assert [r["id"] for r in body["rows"]] == ["job", "attempt-1", "attempt-2"]
    failure = next(m for m in body["marks"] if m["kind"] == "failure")
    assert (failure["row"], failure["failureClass"]) == ("attempt-1", "OOMKilled")
    assert [s["kind"] for s in body["spans"] if s["row"] == "attempt-2"] == ["backoff", "starting", "running"]
    refused = next(m for m in body["marks"] if m["kind"] == "refused")  # kept by the CRD's schema, then shown
    assert refused["row"] == "attempt-2" and refused["label"].startswith("timed-worker-1-2 refused by node n3")

    grant(admin, "pod-lister", (world.home, "writer"), [client.V1PolicyRule(api_groups=[""], resources=["pods"],
          verbs=["list"])], namespace=world.home)  # fmt: skip

    def pod_row() -> bool:  # once the API's cached "no" (10 s) has expired
        return bool([r["id"] for r in world.writer.get(path).json()["rows"]][-1] == "pod:timed-worker-0-2")

    poll_until(pod_row, timeout=30, interval=0.5, what="the pod's row, once the caller may list pods")

    chrome = world.writer.get(path, params={"format": "chrome"})
    assert chrome.status_code == 200 and "attachment" in chrome.headers["content-disposition"]
    events = chrome.json()["traceEvents"]
    assert {e["ph"] for e in events} >= {"M", "X", "i"}
    assert world.writer.get(path, params={"format": "svg"}).status_code == 422
    read_only = world.reader.get(path)  # may read jobs everywhere, not pods: attempts yes, pods no
    assert read_only.status_code == 200 and not [r for r in read_only.json()["rows"] if r["id"].startswith("pod:")]
    assert world.anonymous.get(path).status_code == 401
    assert world.writer.get(jobs_path(world.home, "missing") + "/timeline").status_code == 404


def test_tjctl_timeline_prints_a_table_and_writes_a_chrome_trace(
    world: World, admin: client.ApiClient, api_server: Api, tmp_path: Path
) -> None:
    job = create(world, "timed")
    start = datetime.fromisoformat(job["metadata"]["creationTimestamp"]) - timedelta(seconds=60)  # all in the past
    client.CustomObjectsApi(admin).patch_namespaced_custom_object_status(
        GROUP, VERSION, world.home, PLURAL, "timed", {"status": _history(start)}
    )
    token = str(world.writer.headers["Authorization"]).split()[1]
    rest = ("--server", api_server.url, "--token", token, "-n", world.home)
    table = tjctl(*rest, "timeline", "timed")
    assert table.returncode == 0, table.stderr
    assert "attempt 2, from step 100" in table.stdout and "OOMKilled" in table.stdout
    assert "timed-worker-1-2 refused by node n3: OutOfnvidia.com/gpu, 4 times since" in table.stdout
    trace = tmp_path / "trace.json"
    written = tjctl(*rest, "timeline", "timed", "--chrome", str(trace))
    assert written.returncode == 0, written.stderr
    assert any(e.get("cat") == "checkpoint" for e in json.loads(trace.read_text())["traceEvents"])
    as_json = json.loads(tjctl(*rest, "-o", "json", "timeline", "timed").stdout)
    assert as_json["end"] >= as_json["start"] and datetime.fromisoformat(as_json["end"]) <= datetime.now(UTC)
