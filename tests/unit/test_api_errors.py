"""How the SDK's typed errors about Kubernetes calls (made with the REST API's own identity) reach the API's
callers: what concerns their request as it is, an unreachable Kubernetes as 503, and anything else as 502 that
names the job but not the apiserver's words (which may name the API's own ServiceAccount)."""

import logging

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from trainingjob_api import problems
from trainingjob_sdk.errors import (
    Conflict,
    FieldError,
    Forbidden,
    Invalid,
    NotFound,
    TrainingJobError,
    Unauthorized,
    Unavailable,
)

pytestmark = pytest.mark.fast

JOB = "/api/v1/namespaces/team/trainingjobs/{name}"
OWN_IDENTITY = 'trainingjobs is forbidden: User "system:serviceaccount:tj-system:trainingjob-api" cannot patch'
UNREACHABLE = "the Kubernetes API server is unreachable: cannot connect (Connection refused)"


def answer(
    error: TrainingJobError, path: str = JOB.format(name="mnist")
) -> tuple[int, dict[str, object], dict[str, str]]:
    app = FastAPI()
    problems.install(app)

    @app.get("/api/v1/namespaces/{namespace}/trainingjobs/{name}")
    @app.get("/api/v1/namespaces/{namespace}/trainingjobs")
    def fail() -> None:
        raise error

    with TestClient(app) as client:
        response = client.get(path)
    return response.status_code, response.json(), dict(response.headers)


@pytest.mark.parametrize(
    ("error", "status", "reason", "message"),
    [
        (NotFound('trainingjob "mnist" in namespace "team" not found', status=404, reason="NotFound"), 404,
         "NotFound", 'trainingjob "mnist" in namespace "team" not found'),
        (NotFound('pod "mnist-worker-0-1" has no logs yet', status=404, reason="LogsNotAvailable"), 404,
         "LogsNotAvailable", 'pod "mnist-worker-0-1" has no logs yet'),
        (Conflict('trainingjobs "mnist" already exists', status=409, reason="AlreadyExists"), 409, "AlreadyExists",
         'trainingjobs "mnist" already exists'),
        (Conflict("it is finished (phase Succeeded)", status=409, reason="JobFinished"), 409, "JobFinished",
         "it is finished (phase Succeeded)"),
        (Invalid("metadata.generateName must be a prefix", status=None), 422, "Invalid",
         "metadata.generateName must be a prefix"),
        (Unavailable(UNREACHABLE), 503, "ServiceUnavailable", UNREACHABLE),
    ],
    ids=["not-found", "no-logs-yet", "already-exists", "job-finished", "invalid-before-sending", "unreachable"],
)  # fmt: skip
def test_what_concerns_the_request_is_told_as_it_is(
    error: TrainingJobError, status: int, reason: str, message: str
) -> None:
    code, body, _ = answer(error)
    assert (code, body["reason"], body["message"]) == (status, reason, message)


def test_an_invalid_object_names_each_field_kubernetes_named() -> None:
    fields = [FieldError("metadata.labels", "Invalid value: a label value"), FieldError("spec.x", "unknown field")]
    code, body, _ = answer(Invalid('TrainingJob "mnist" is invalid', fields, status=422, reason="Invalid"))
    assert code == 422 and body["reason"] == "Invalid"
    assert body["fields"] == [{"field": f.field, "message": f.message} for f in fields]


@pytest.mark.parametrize(
    "error",
    [
        Forbidden(OWN_IDENTITY, status=403),
        Unauthorized(f"{OWN_IDENTITY}: Unauthorized", status=401),
        Unavailable(f"{OWN_IDENTITY}: etcdserver: request timed out", status=500),
        TrainingJobError(f"{OWN_IDENTITY}: method not allowed", status=405),
    ],
    ids=["forbidden", "unauthorized", "failing", "unexpected"],
)
def test_the_apis_own_identity_refused_or_kubernetes_failing_is_502_without_its_words(
    error: TrainingJobError, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger=problems.__name__):
        code, body, headers = answer(error)
    assert (code, body["reason"]) == (502, "BadGateway")
    assert body["message"] == (
        f'Kubernetes could not serve the request for trainingjob "mnist" in namespace "team" (HTTP {error.status})'
    )
    assert "serviceaccount" not in str(body) and "WWW-Authenticate" not in headers  # the caller's token is fine
    assert OWN_IDENTITY in caplog.text  # the operator of the API learns what Kubernetes said


def test_a_502_without_a_job_in_the_path_names_the_namespace() -> None:
    code, body, _ = answer(Forbidden(OWN_IDENTITY, status=403), "/api/v1/namespaces/team/trainingjobs")
    assert code == 502 and 'trainingjobs in namespace "team"' in str(body["message"])


@pytest.mark.parametrize(
    "message",
    [
        'trainingjobs "mnist" is forbidden: exceeded quota: jobs, requested: count/trainingjobs=1, used: 5, limited: 5',
        'admission webhook "policy.example.com" denied the request: team label required',
        "trainingjobs \"mnist\" is forbidden: ValidatingAdmissionPolicy 'gpus' denied request: at most 8 GPUs",
    ],
    ids=["quota", "webhook", "admission-policy"],
)
def test_a_refusal_of_the_request_itself_is_told_as_403_with_its_words(message: str) -> None:
    code, body, _ = answer(Forbidden(message, status=403))
    assert (code, body["reason"], body["message"]) == (403, "Forbidden", message)


def test_throttling_is_503_with_a_retry_after() -> None:
    code, body, headers = answer(Unavailable(f"{OWN_IDENTITY}: too many requests", status=429))
    assert (code, body["reason"], headers["retry-after"]) == (503, "ServiceUnavailable", "1")
    assert "serviceaccount" not in str(body)


CALLER = "system:serviceaccount:team:ada"


@pytest.mark.parametrize(
    ("message", "status"),
    [
        pytest.param(f'trainingjobs "mnist" is forbidden: User "{CALLER}" cannot get resource', 403, id="the caller's"),
        pytest.param(OWN_IDENTITY, 502, id="the API's own"),
        pytest.param(
            f'users "{CALLER}" is forbidden: User "system:serviceaccount:tj:api" cannot impersonate resource "users"',
            502, id="impersonation refused to the API",
        ),
        pytest.param('is forbidden: User "system:serviceaccount:team:ada2" cannot get', 502, id="a longer name"),
    ],
)  # fmt: skip
def test_an_rbac_denial_is_the_callers_only_when_it_names_them(message: str, status: int) -> None:
    assert problems.from_sdk(Forbidden(message, status=403), "it", CALLER).problem.status == status
