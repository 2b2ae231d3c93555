"""What the REST API tells a caller without a token: liveness, and whether it is ready, nothing more. /metrics needs a
caller allowed `get /metrics`, and so do the reasons /readyz fails (every authenticated user may `get /readyz` in
Kubernetes' default RBAC); the docs and the schema need any token Kubernetes accepts. In process
(tests.support.api_app: a token table, a rule table in which only the monitor may `get /metrics`);
tests/integration/rest/test_health.py asks a real apiserver the same questions."""

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from tests.support.api_app import served

pytestmark = pytest.mark.fast

NOBODY: dict[str, str] = {}
READER = {"Authorization": "Bearer reader-token"}
WRITER = {"Authorization": "Bearer writer-token"}  # may do anything to jobs, not read /metrics
MONITOR = {"Authorization": "Bearer monitor-token"}
FORGED = {"Authorization": "Bearer forged"}


@pytest.fixture
def api() -> Iterator[TestClient]:
    with served(NOBODY) as each:
        yield each


def ready(api: TestClient) -> None:
    """The job cache synced and watching, the apiserver's own /readyz answered 200 a moment ago."""
    state = api.app.state.trainingjob  # type: ignore[attr-defined]
    for informer in state.cache._informers:
        informer.synced.set()
        informer.current.set()
    state.readiness.get_or_compute("apiserver", lambda: "")


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        pytest.param(NOBODY, 401, id="no token"),
        pytest.param(FORGED, 401, id="a token Kubernetes does not accept"),
        pytest.param(WRITER, 403, id="a tenant who may do anything to jobs"),
        pytest.param(MONITOR, 200, id="a caller allowed get /metrics"),
    ],
)
def test_metrics_answer_only_callers_allowed_to_read_them(
    api: TestClient, headers: dict[str, str], status: int
) -> None:
    response = api.get("/metrics", headers=headers)
    assert response.status_code == status, response.text
    assert ("trainingjob_api_requests_total" in response.text) is (status == 200)


@pytest.mark.parametrize(
    ("headers", "answer"),
    [
        pytest.param(NOBODY, {"status": "unavailable"}, id="no token"),
        pytest.param(READER, {"status": "unavailable"}, id="a caller without get /metrics"),
        pytest.param(
            MONITOR, {"status": "syncing", "message": "the job cache has not listed every job yet"},
            id="a caller allowed get /metrics",
        ),
    ],
)  # fmt: skip
def test_readyz_says_why_only_to_callers_allowed_to_know(
    api: TestClient, headers: dict[str, str], answer: dict[str, object]
) -> None:
    response = api.get("/readyz", headers=headers)
    assert (response.status_code, response.json()) == (503, answer)


def test_a_ready_api_tells_strangers_ok_and_monitors_its_jobs(api: TestClient) -> None:
    ready(api)
    assert (api.get("/readyz").status_code, api.get("/readyz").json()) == (200, {"status": "ok"})
    assert api.get("/readyz", headers=MONITOR).json() == {"status": "ok", "jobs": 0}


def test_liveness_is_open(api: TestClient) -> None:
    assert (api.get("/healthz").status_code, api.get("/healthz").json()) == (200, {"status": "ok"})


@pytest.mark.parametrize(
    "path", ["/docs", "/openapi.json", "/docs-assets/swagger-ui-bundle.js", "/docs-assets/swagger-ui.css"]
)
def test_the_docs_and_the_schema_need_a_token(api: TestClient, path: str) -> None:
    assert api.get(path).status_code == 401
    assert api.get(path, headers=FORGED).status_code == 401
    assert api.get(path, headers=READER).status_code == 200


def test_the_schema_is_the_apps_and_the_docs_serve_only_their_own_files(api: TestClient) -> None:
    schema = api.get("/openapi.json", headers=READER).json()
    assert "/api/v1/namespaces/{namespace}/trainingjobs" in schema["paths"]
    assert api.get("/docs-assets/index.html", headers=READER).status_code == 404
