"""Who may do what through the REST API: authentication, tokens minted for its audience, 403s that say why, the
failed rank's log lines, and errors that never carry the server's credentials."""

import json
import ssl

import httpx
import pytest
from kubernetes import client
from testbed.controlplane import ControlPlane
from testbed.processes import poll_until
from tests.support.rest_api import (
    AUDIENCE,
    TIMEOUT,
    Api,
    World,
    create,
    jobs_path,
    manifest,
    service_account,
)

from trainingjob.model import GROUP, PLURAL, VERSION

pytestmark = pytest.mark.envtest


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
