"""The REST API's job routes in process, without Kubernetes (tests.support.api_app). What each route answers, its
status and the error naming the field; the same routes against a real apiserver are in tests/integration/rest."""

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from tests.support.api_app import JOBS, NS, served
from tests.support.builders import job_manifest

pytestmark = pytest.mark.fast
Manifest = dict[str, Any]


@pytest.fixture
def api() -> Iterator[TestClient]:
    with served() as each:
        yield each


def created(api: TestClient, *names: str, **labels: str) -> None:
    for name in names:
        response = api.post(JOBS, json=job_manifest(name, labels=labels or None))
        assert response.status_code == 201, response.text


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        pytest.param(job_manifest("mnist"), 201, "mnist", id="valid"),
        pytest.param(job_manifest("mnist", workers=0), 422, "spec.workers.replicas", id="no workers"),
        pytest.param(job_manifest("mnist", mode="Gossip"), 422, "spec.mode", id="unknown mode"),
        pytest.param({**job_manifest(), "metadata": {}}, 422, "metadata.name", id="no name"),
    ],
)
def test_create_answers_the_job_or_names_the_field(api: TestClient, body: Manifest, status: int, says: str) -> None:
    response = api.post(JOBS, json=body)
    assert response.status_code == status, response.text
    assert says in (response.json()["metadata"]["name"] if status == 201 else response.json()["message"])


@pytest.mark.parametrize(
    ("token", "status"),
    [
        pytest.param("writer-token", 201, id="writer"),
        pytest.param("reader-token", 403, id="reader"),
        pytest.param("not-a-token", 401, id="unknown token"),
    ],
)
def test_create_is_for_callers_allowed_to(api: TestClient, token: str, status: int) -> None:
    response = api.post(JOBS, json=job_manifest("mnist"), headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == status, response.text


@pytest.mark.parametrize(
    ("query", "names"),
    [
        pytest.param("", ["a", "b", "c"], id="every job, by name"),
        pytest.param("?labelSelector=team%3Dvision", ["b", "c"], id="by label"),
        pytest.param("?limit=2", ["a", "b"], id="a page"),
    ],
)
def test_list_answers_the_namespaces_jobs(api: TestClient, query: str, names: list[str]) -> None:
    created(api, "c", "b", team="vision")
    created(api, "a", team="audio")
    response = api.get(JOBS + query, headers={"Authorization": "Bearer reader-token"})
    assert response.status_code == 200, response.text
    assert [job["metadata"]["name"] for job in response.json()["items"]] == names


@pytest.mark.parametrize(
    ("path", "status"),
    [
        pytest.param("/a", 200, id="there"),
        pytest.param("/nowhere", 404, id="not there"),
        pytest.param("/Not_A_Name", 422, id="not a name"),
    ],
)
def test_get_answers_the_job_or_404(api: TestClient, path: str, status: int) -> None:
    created(api, "a")
    response = api.get(JOBS + path)
    assert response.status_code == status, response.text
    if status == 404:
        assert "nowhere" in response.json()["message"]


def test_delete_removes_the_job_and_a_second_delete_is_404(api: TestClient) -> None:
    created(api, "a")
    assert api.delete(f"{JOBS}/a").json() == {"namespace": NS, "name": "a", "status": "Deleting"}
    assert api.get(f"{JOBS}/a").status_code == 404
    assert api.delete(f"{JOBS}/a").status_code == 404


@pytest.mark.parametrize(
    ("action", "suspended"), [pytest.param("suspend", True, id="suspend"), pytest.param("resume", False, id="resume")]
)
def test_suspend_and_resume_set_the_run_policy(api: TestClient, action: str, suspended: bool) -> None:
    created(api, "a")
    response = api.post(f"{JOBS}/a/{action}")
    assert response.status_code == 200, response.text
    assert response.json()["spec"]["runPolicy"]["suspend"] is suspended
    assert api.get(f"{JOBS}/a").json()["spec"]["runPolicy"]["suspend"] is suspended  # the cache saw it
    assert api.post(f"{JOBS}/a/{action}", headers={"Authorization": "Bearer reader-token"}).status_code == 403
