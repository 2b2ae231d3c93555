"""tjctl through the REST API, as a ServiceAccount that may manage jobs in one namespace only: the same commands and
outputs as through a kubeconfig (tests/integration/test_tjctl_kube.py), the REST API's refusals as one line each,
and the kept log lines of a failed attempt from GET .../failure (a job as GET returns it leaves them out)."""

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from testbed.processes import free_port, poll_until
from tests.support.cli import REPO, tjctl
from tests.support.rest_api import TIMEOUT, Api, World, manifest

from trainingjob.model import GROUP, PLURAL, VERSION

pytestmark = pytest.mark.envtest
NOW = datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _rest(api_server: Api, world: World, namespace: str = "") -> tuple[str, ...]:
    token = str(world.writer.headers["Authorization"]).split()[1]
    return ("--server", api_server.url, "--token", token, "-n", namespace or world.home)


def test_tjctl_manages_jobs_through_the_rest_api(api_server: Api, world: World) -> None:
    rest = _rest(api_server, world)
    example = str(REPO / "examples" / "digits-ddp.yaml")
    submitted = tjctl("submit", example, "-o", "json", *rest)  # the flags after the command
    assert submitted.returncode == 0, submitted.stderr
    assert json.loads(submitted.stdout)["metadata"]["namespace"] == world.home
    assert json.loads(tjctl(*rest, "-o", "json", "get", "digits-ddp").stdout)["spec"]["workers"]["replicas"] == 2
    suspended = tjctl(*rest, "suspend", "digits-ddp")
    assert (
        suspended.stdout.strip() == "trainingjob.trainingjob.io/digits-ddp suspended: it does not start until resumed"
    )
    assert (
        json.loads(tjctl("resume", "digits-ddp", "-o", "json", *rest).stdout)["spec"]["runPolicy"]["suspend"] is False
    )
    elsewhere = tjctl(*_rest(api_server, world, world.other), "submit", example)
    assert elsewhere.returncode == 1 and "error from the server (Forbidden)" in elsewhere.stderr, elsewhere.stderr
    assert tjctl(*rest, "delete", "digits-ddp").stdout.strip() == "trainingjob.trainingjob.io/digits-ddp deleted"
    missing = tjctl(*rest, "get", "digits-ddp")
    assert missing.returncode == 1 and "error from the server (NotFound)" in missing.stderr, missing.stderr


def test_tjctl_submits_every_document_and_lists_by_label(api_server: Api, world: World, tmp_path: Path) -> None:
    rest = _rest(api_server, world)
    documents = [manifest("one", {"team": "vision"}), manifest("two", {"team": "nlp"}), manifest("three")]
    documents[1]["metadata"] = {"generateName": "two-", "labels": {"team": "nlp"}}
    (tmp_path / "jobs.yaml").write_text(yaml.safe_dump_all(documents))
    submitted = tjctl("submit", str(tmp_path / "jobs.yaml"), *rest)
    created = re.findall(r"^trainingjob\.trainingjob\.io/(\S+) created$", submitted.stdout, re.MULTILINE)
    assert created[0] == "one" and re.fullmatch(r"two-[a-z0-9]{5}", created[1]) and created[2] == "three", created

    def vision() -> list[str] | None:  # the API lists from a watch-fed cache: the jobs show up in a moment
        found = tjctl("list", "-l", "team=vision", "-o", "name", *rest).stdout.split()
        return found or None

    assert poll_until(vision, timeout=TIMEOUT, what="the labelled job listed") == ["trainingjob.trainingjob.io/one"]
    every = tjctl("-o", "json", "list", "-A", *rest)
    listed = json.loads(every.stdout)
    assert listed["kind"] == "List" and set(created) <= {i["metadata"]["name"] for i in listed["items"]}
    again = tjctl("submit", str(tmp_path / "jobs.yaml"), *rest)  # two-... gets a new name; the others exist
    assert again.returncode == 1 and again.stderr.count("(AlreadyExists)") == 2, again.stderr
    assert re.fullmatch(r"trainingjob\.trainingjob\.io/two-[a-z0-9]{5} created\n", again.stdout), again.stdout


def test_tjctl_logs_of_a_gone_attempt_come_from_the_failure_endpoint(
    api_server: Api, world: World, admin: client.ApiClient
) -> None:
    assert world.writer.post(f"/api/v1/namespaces/{world.home}/trainingjobs", json=manifest("oom")).status_code == 201
    tail = "epoch 1\nCUDA out of memory\n"
    failure = {"pod": "oom-worker-0-1", "attempt": 1, "failureClass": "OOMKilled", "reason": "OOMKilled",
               "time": NOW, "logTail": tail}  # fmt: skip
    client.CustomObjectsApi(admin).patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        world.home,
        PLURAL,
        "oom",
        {"status": {"phase": "Running", "attempt": 2, "lastFailure": failure}},
    )
    rest = _rest(api_server, world)

    def kept() -> str | None:  # the cache has the status in a moment
        found = tjctl("logs", "oom", "--previous-attempt", *rest)
        return found.stdout if found.returncode == 0 else None

    assert poll_until(kept, timeout=TIMEOUT, what="the kept lines") == tail
    tailed = tjctl("logs", "oom", "--previous-attempt", "--tail", "1", *rest)
    assert tailed.stdout == "CUDA out of memory\n" and "is gone" in tailed.stderr, tailed.stderr


def test_tjctl_wait_times_out_between_keepalives(api_server: Api, world: World) -> None:
    """The API's keepalives come every second here: a shorter --timeout ends between two, as a timeout (3)."""
    rest = _rest(api_server, world)
    assert world.writer.post(f"/api/v1/namespaces/{world.home}/trainingjobs", json=manifest("idle")).status_code == 201
    waited = tjctl("wait", "idle", "--for", "Running", "--timeout", "0.4s", *rest)
    assert waited.returncode == 3 and "did not reach Running in 0 s" in waited.stderr, waited.stderr  # not 1 s
    late = tjctl("wait", "idle", "--timeout", "2.5s", *rest)  # past two keepalives
    assert late.returncode == 3 and "did not reach Succeeded" in late.stderr, late.stderr


def test_tjctl_refuses_a_server_without_a_token_and_says_when_none_answers() -> None:
    result = tjctl("--server", "http://127.0.0.1:9", "list")
    assert result.returncode == 2 and "--token" in result.stderr
    down = tjctl("list", "--server", f"http://127.0.0.1:{free_port()}", "--token", "t")
    assert down.returncode == 4 and down.stderr.startswith("error: the REST API at") and "Traceback" not in down.stderr
