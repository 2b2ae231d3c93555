"""The REST API writes as its caller: the impersonation headers made from what TokenReview said (a table), the
client that adds them to every request, and every write route going through it (in process). That Kubernetes
then authorizes, admits and audits the caller is shown against a real apiserver in
tests/integration/rest/test_acting_as_caller.py."""

from typing import Any

import pytest
from kubernetes import client
from tests.support.api_app import JOBS, TOKENS, served
from tests.support.builders import job_manifest
from urllib3 import HTTPHeaderDict

from trainingjob.kube.impersonation import Impersonating, NotActedFor, impersonation_headers
from trainingjob.kube.reviews import Caller

pytestmark = pytest.mark.fast

POD = "authentication.kubernetes.io/pod-name"
SA = "system:serviceaccount:team-a:ci"


@pytest.mark.parametrize(
    ("caller", "headers"),
    [
        pytest.param(Caller("ada"), [("Impersonate-User", "ada")], id="a user alone"),
        pytest.param(
            Caller(SA, uid="u-1", groups=("system:serviceaccounts", "system:authenticated")),
            [("Impersonate-User", SA), ("Impersonate-Uid", "u-1"),
             ("Impersonate-Group", "system:serviceaccounts"), ("Impersonate-Group", "system:authenticated")],
            id="uid and every group, in order",
        ),
        pytest.param(
            Caller(SA, extra=((POD, ("ci-0",)), ("scopes.example.com/x", ("all",)))),
            [("Impersonate-User", SA), ("Impersonate-Extra-authentication.kubernetes.io%2Fpod-name", "ci-0")],
            id="a ServiceAccount extra, its key escaped; other extras left out",
        ),
    ],
)  # fmt: skip
def test_the_headers_carry_who_tokenreview_named(caller: Caller, headers: list[tuple[str, str]]) -> None:
    assert list(impersonation_headers(caller)) == headers


@pytest.mark.parametrize(
    ("caller", "says"),
    [
        pytest.param(Caller("root", groups=("system:masters",)), "system:masters", id="system:masters"),
        pytest.param(Caller("system:node:n1", groups=("system:nodes",)), "system:nodes", id="a kubelet"),
        pytest.param(Caller("eve\r\nImpersonate-Group: system:masters"), "User", id="a header in a name"),
        pytest.param(Caller("ada", groups=("",)), "Group", id="an empty group"),
        pytest.param(Caller("zoë"), "User", id="a name a header cannot carry"),
    ],
)
def test_callers_the_api_never_acts_for(caller: Caller, says: str) -> None:
    with pytest.raises(NotActedFor, match=says):
        impersonation_headers(caller)


class Sent(Exception):  # noqa: N818
    """What the connection pool was asked to send."""

    def __init__(self, method: str, headers: HTTPHeaderDict) -> None:
        super().__init__(method)
        self.method, self.headers = method, headers


class Pool:
    """Stands for the client's connection pool (its rest_client): raises what it was given instead of sending."""

    closed = False

    def request(self, method: str, url: str, headers: Any = None, **_: Any) -> None:
        raise Sent(method, headers)

    def close(self) -> None:
        self.closed = True


def test_a_generated_api_call_goes_out_with_repeated_headers_on_the_shared_pool() -> None:
    shared = client.ApiClient(client.Configuration(host="https://127.0.0.1:9"))
    shared.rest_client = pool = Pool()
    headers = (("Impersonate-User", "ada"), ("Impersonate-Group", "a"), ("Impersonate-Group", "b"))
    acting = Impersonating(shared, headers)
    with pytest.raises(Sent) as sent:
        client.CustomObjectsApi(acting).create_namespaced_custom_object("g", "v1", "ns", "things", {"a": 1})
    assert sent.value.method == "POST" and sent.value.headers.getlist("Impersonate-Group") == ["a", "b"]
    assert sent.value.headers["Impersonate-User"] == "ada" and "application/json" in sent.value.headers["Accept"]
    with pytest.raises(Sent) as plain:
        client.CustomObjectsApi(shared).create_namespaced_custom_object("g", "v1", "ns", "things", {"a": 1})
    assert "Impersonate-User" not in plain.value.headers  # the shared client itself is unchanged
    acting.close()
    assert not pool.closed


def test_every_write_route_acts_as_the_caller() -> None:
    with served() as api:
        jobs = api.app.state.trainingjob.jobs  # type: ignore[attr-defined]
        assert api.post(JOBS, json=job_manifest("acted")).status_code == 201
        assert api.post(f"{JOBS}/acted/suspend").status_code == 200
        assert api.post(f"{JOBS}/acted/resume").status_code == 200
        assert api.delete(f"{JOBS}/acted").status_code == 200
    assert jobs.acted_for == [impersonation_headers(TOKENS["writer-token"])] * 4


def test_a_caller_the_api_never_acts_for_writes_nothing() -> None:
    with served() as api:
        state = api.app.state.trainingjob  # type: ignore[attr-defined]
        state.authenticator.authenticate = lambda token: Caller("writer", groups=("system:masters",))
        refused = api.post(JOBS, json=job_manifest("masters"))
        assert refused.status_code == 403 and "system:masters" in refused.json()["message"]
        assert state.jobs.stored == {} and state.jobs.acted_for == []
