"""The hot writes sent straight on the client's connections (kube/direct.py), against the envtest apiserver: what
they create is what was sent; a refusal, a missing object and an unreachable apiserver raise exactly what the
generated client raises for the same request (so the one error mapping reads both alike); a token the client's
refresh hook hands out is the one the apiserver sees."""

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import urllib3
from kubernetes import client
from testbed.controlplane import ControlPlane

from trainingjob.kube.answers import Answer, answer
from trainingjob.kube.direct import Direct, pod_path
from trainingjob.kube.resources import delete_options

pytestmark = pytest.mark.envtest
Manifest = dict[str, Any]


def pod(name: str, **metadata: Any) -> Manifest:
    container = {"name": "main", "image": "busybox", "env": [{"name": "TJ_RANK", "value": "0"}]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "direct"}, **metadata},
        "spec": {"containers": [container], "restartPolicy": "Never"},
    }


@pytest.fixture
def api(envtest: ControlPlane) -> Iterator[client.ApiClient]:
    with envtest.api_client() as api:
        yield api


def read(error: Exception) -> Answer:
    found = answer(error)
    assert found is not None, f"no answer read from {error!r}"
    return found


def refusal(send: Callable[[], Any]) -> client.ApiException:
    with pytest.raises(client.ApiException) as caught:
        send()
    return caught.value


def test_a_created_pod_is_the_one_sent_and_its_answer_is_the_stored_pod(api: client.ApiClient, envtest_ns: str) -> None:
    sent = pod("made", finalizers=["trainingjob.io/test"])
    response = Direct(api).send("POST", pod_path(envtest_ns), sent)
    created = json.loads(response.data)
    stored = client.CoreV1Api(api).read_namespaced_pod("made", envtest_ns)
    assert response.status == 201
    assert created["metadata"]["uid"] == stored.metadata.uid
    assert stored.metadata.finalizers == ["trainingjob.io/test"]
    assert stored.spec.containers[0].env[0].value == "0"
    Direct(api).send("PATCH", pod_path(envtest_ns, "made"), {"metadata": {"finalizers": None}},
                     content_type="application/merge-patch+json")  # fmt: skip


@pytest.mark.parametrize(
    ("case", "expected"),
    [("exists", (409, "AlreadyExists")), ("invalid", (422, "Invalid")), ("wrong uid", (409, "Conflict"))],
    ids=["create-of-a-name-taken", "create-of-an-invalid-pod", "delete-of-a-namesake"],
)
def test_a_refusal_raises_what_the_generated_client_raises(
    api: client.ApiClient, envtest_ns: str, case: str, expected: tuple[int, str]
) -> None:
    core, direct = client.CoreV1Api(api), Direct(api)
    core.create_namespaced_pod(envtest_ns, pod("taken"))
    generated: Callable[[], Any]
    if case == "exists":
        generated = lambda: core.create_namespaced_pod(envtest_ns, pod("taken"), _preload_content=False)  # noqa: E731
        ours = lambda: direct.send("POST", pod_path(envtest_ns), pod("taken"))  # noqa: E731
    elif case == "invalid":
        bad = pod("bad", labels={"app": "-not a label-"})
        generated = lambda: core.create_namespaced_pod(envtest_ns, bad, _preload_content=False)  # noqa: E731
        ours = lambda: direct.send("POST", pod_path(envtest_ns), bad)  # noqa: E731
    else:
        other = delete_options("00000000-0000-4000-8000-000000000000")
        generated = lambda: core.delete_namespaced_pod("taken", envtest_ns, body=other, _preload_content=False)  # noqa: E731
        ours = lambda: direct.send("DELETE", pod_path(envtest_ns, "taken"), other)  # noqa: E731
    theirs, mine = refusal(generated), refusal(ours)
    assert type(mine) is type(theirs)
    assert (mine.status, read(mine).reason) == (theirs.status, read(theirs).reason) == expected
    assert read(mine).causes == read(theirs).causes
    assert core.read_namespaced_pod("taken", envtest_ns).metadata.deletion_timestamp is None


def test_a_guarded_delete_of_the_pod_decided_on_deletes_it(api: client.ApiClient, envtest_ns: str) -> None:
    core = client.CoreV1Api(api)
    uid = core.create_namespaced_pod(envtest_ns, pod("going")).metadata.uid
    Direct(api).send("DELETE", pod_path(envtest_ns, "going"), delete_options(uid, gracePeriodSeconds=0))
    missing = refusal(lambda: core.read_namespaced_pod("going", envtest_ns))
    assert missing.status == 404


def test_an_apiserver_that_does_not_answer_raises_what_the_generated_client_raises(envtest: ControlPlane) -> None:
    with envtest.api_client() as api:
        api.configuration.host = "https://127.0.0.1:9"  # discard: nothing listens
        api.rest_client.pool_manager.connection_pool_kw["retries"] = False
        core = client.CoreV1Api(api)
        with pytest.raises(urllib3.exceptions.HTTPError) as theirs:
            core.create_namespaced_pod("default", pod("x"), _preload_content=False, _request_timeout=(5, 30))
        with pytest.raises(urllib3.exceptions.HTTPError) as mine:
            Direct(api).send("POST", pod_path("default"), pod("x"))
    assert type(mine.value) is type(theirs.value)
    assert read(mine.value).status is None and read(mine.value).transient


def test_the_token_the_refresh_hook_hands_out_is_the_one_the_apiserver_sees(
    api: client.ApiClient, envtest: ControlPlane, envtest_ns: str
) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_service_account(envtest_ns, {"metadata": {"name": "bot"}})
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=600))
    token = core.create_namespaced_service_account_token("bot", envtest_ns, request).status.token
    configuration = client.Configuration()
    configuration.host, configuration.ssl_ca_cert = envtest.server_url, str(envtest.pki.cert)
    configuration.api_key = {"authorization": "Bearer not-a-token"}

    def refresh(settings: client.Configuration) -> None:
        settings.api_key = {"authorization": f"Bearer {token}"}

    configuration.refresh_api_key_hook = refresh
    with client.ApiClient(configuration) as as_bot:
        forbidden = refusal(lambda: Direct(as_bot).send("POST", pod_path(envtest_ns), pod("x")))
    assert forbidden.status == 403  # known, and refused by RBAC: an unknown token would be 401
    assert f"system:serviceaccount:{envtest_ns}:bot" in read(forbidden).message
