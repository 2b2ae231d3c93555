"""Requests that change something come from the API's own clients, never from another site's page: behind an
authenticating proxy (which adds the person's token from a cookie) a cross-site form could otherwise create, suspend,
resume and delete jobs. Such a form cannot send a header of its own nor a JSON or YAML body; a body without a
Content-Type is not taken for JSON. In process (tests.support.api_app); the rule itself as a table first."""

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from tests.support.api_app import JOBS, SAME_SITE, served
from tests.support.builders import job_manifest

from trainingjob_api.writes import write_refusal

pytestmark = pytest.mark.fast

FORM = "application/x-www-form-urlencoded"
WRITER = {"Authorization": "Bearer writer-token"}


MARKED = {"x-requested-with": "x"}  # the header the SDK, tjctl and the dashboard send


def body(content_type: str = "") -> dict[str, str]:
    """The headers of a marked request with a 3-byte body of this type (none when "")."""
    return MARKED | {"content-length": "3"} | ({"content-type": content_type} if content_type else {})


@pytest.mark.parametrize(
    ("method", "headers", "status"),
    [
        pytest.param("GET", {}, None, id="a read needs nothing"),
        pytest.param("HEAD", {"sec-fetch-site": "cross-site"}, None, id="a cross-site read"),
        pytest.param("POST", {}, 403, id="a post without the header"),
        pytest.param("DELETE", {}, 403, id="a delete without the header"),
        pytest.param("PUT", {"x-requested-with": " "}, 403, id="a blank header"),
        pytest.param("POST", MARKED, None, id="a post without a body"),
        pytest.param("post", MARKED | {"content-length": "0"}, None, id="an empty body, lower case"),
        pytest.param("PATCH", body(), 415, id="a body with no type"),
        pytest.param("POST", MARKED | {"transfer-encoding": "chunked"}, 415, id="chunked, no type"),
        pytest.param("POST", body(FORM), 415, id="a form"),
        pytest.param("POST", body("text/plain"), 415, id="text"),
        pytest.param("POST", body("multipart/form-data; boundary=x"), 415, id="multipart"),
        pytest.param("POST", body("application/json; charset=utf-8"), None, id="json"),
        pytest.param("POST", body("application/merge-patch+json"), None, id="+json"),
        pytest.param("POST", body("Application/YAML"), None, id="yaml"),
        pytest.param("POST", MARKED | {"sec-fetch-site": "cross-site"}, 403, id="cross-site"),
        pytest.param("POST", MARKED | {"sec-fetch-site": "same-site"}, 403, id="a sibling site"),
        pytest.param("POST", MARKED | {"sec-fetch-site": "same-origin"}, None, id="its own page"),
        pytest.param("POST", MARKED | {"sec-fetch-site": "none"}, None, id="typed by a person"),
    ],
)
def test_what_a_write_must_carry(method: str, headers: dict[str, str], status: int | None) -> None:
    refusal = write_refusal(method, headers)
    assert (refusal and refusal.problem.status) == status


@pytest.fixture
def api() -> Iterator[TestClient]:
    """The app, and a caller whose token the (stand-in) proxy adds: the writer's, who may do anything to jobs."""
    with served(WRITER) as each:
        assert each.post(JOBS, json=job_manifest("a"), headers=SAME_SITE).status_code == 201
        yield each


@pytest.mark.parametrize(
    ("method", "path"),
    [
        pytest.param("POST", JOBS, id="create"),
        pytest.param("POST", f"{JOBS}/a/suspend", id="suspend"),
        pytest.param("POST", f"{JOBS}/a/resume", id="resume"),
        pytest.param("DELETE", f"{JOBS}/a", id="delete"),
    ],
)
def test_a_cross_site_form_changes_nothing(api: TestClient, method: str, path: str) -> None:
    """What a hostile page's <form method=post> sends with the person's cookie: a form body, no header of its own."""
    response = api.request(method, path, content=b"metadata=x", headers={"Content-Type": FORM})
    assert response.status_code == 403, response.text
    assert "X-Requested-With" in response.json()["message"]
    assert api.get(f"{JOBS}/a").json()["spec"].get("runPolicy", {}).get("suspend") in (None, False)
    assert [job["metadata"]["name"] for job in api.get(JOBS).json()["items"]] == ["a"]


@pytest.mark.parametrize(
    ("headers", "accepted"),
    [
        pytest.param({}, False, id="no Content-Type"),
        pytest.param({"Content-Type": "text/plain"}, False, id="text/plain"),
        pytest.param({"Content-Type": "application/json"}, True, id="json"),
    ],
)
def test_a_manifest_is_read_only_as_the_type_it_says(api: TestClient, headers: dict[str, str], accepted: bool) -> None:
    """A JSON body with no Content-Type was read as JSON, and created the job."""
    body = b'{"apiVersion": "trainingjob.io/v1", "kind": "TrainingJob", "metadata": {"name": "b"}}'
    response = api.post(JOBS, content=body, headers={**SAME_SITE, **headers})
    if accepted:
        assert response.status_code in (201, 422), response.text  # read as JSON (the manifest has no spec)
    else:
        assert response.status_code == 415, response.text
        assert "application/json or application/yaml" in response.json()["message"]


def test_a_suspend_from_the_clients_passes(api: TestClient) -> None:
    response = api.post(f"{JOBS}/a/suspend", headers=SAME_SITE)
    assert response.status_code == 200 and response.json()["spec"]["runPolicy"]["suspend"] is True
