"""The REST API's job routes in process, without Kubernetes: FastAPI's dependency_overrides put an in-memory job
store (fed into the API's real job cache, as its watch would), a token table and a rule table behind the app's own
dependency (deps.get_state). What each route answers, its status and the error naming the field; the same routes
against a real apiserver are in tests/integration/rest."""

import copy
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any, cast

import pytest
from fastapi.testclient import TestClient
from kubernetes import client
from tests.support.builders import job_manifest

from trainingjob_api.app import create_app
from trainingjob_api.auth import Access, Authenticator, Authorizer, Caller, TtlCache
from trainingjob_api.deps import AppState, get_state
from trainingjob_api.job_cache import CachedJob, JobCache
from trainingjob_api.kube import Kube
from trainingjob_api.logs import StreamSlots
from trainingjob_api.metrics import ApiMetrics
from trainingjob_api.settings import ApiSettings
from trainingjob_sdk import NotFound
from trainingjob_sdk.kube import KubeJobs

pytestmark = pytest.mark.fast

Manifest = dict[str, Any]
NS = "team-a"
JOBS = f"/api/v1/namespaces/{NS}/trainingjobs"
READ_VERBS = {"get", "list", "watch"}
TOKENS = {"writer-token": Caller("writer"), "reader-token": Caller("reader")}


class Jobs:
    """The jobs of the cluster as the API's KubeJobs sees them; every write also reaches the cache, as its watch
    would tell it."""

    def __init__(self, cache: JobCache) -> None:
        self.cache = cache
        self.stored: dict[tuple[str, str], Manifest] = {}

    def create(self, body: Manifest, namespace: str) -> Manifest:
        stored = copy.deepcopy(body)
        stored["metadata"].update(namespace=namespace, uid=f"uid-{len(self.stored)}", resourceVersion="1")
        self.stored[namespace, stored["metadata"]["name"]] = stored
        self.cache._apply("ADDED", CachedJob.from_raw(stored))
        return stored

    def get(self, name: str, namespace: str) -> Manifest:
        if (namespace, name) not in self.stored:
            raise NotFound(f'trainingjobs.trainingjob.io "{name}" not found', status=404, reason="NotFound")
        return self.stored[namespace, name]

    def delete(self, name: str, namespace: str) -> None:
        self.cache._apply("DELETED", CachedJob.from_raw(self.get(name, namespace)))
        del self.stored[namespace, name]

    def set_suspend(self, name: str, suspend: bool, namespace: str) -> Manifest:
        job = self.get(name, namespace)
        job["spec"].setdefault("runPolicy", {})["suspend"] = suspend
        self.cache._apply("MODIFIED", CachedJob.from_raw(job))
        return job


class Tokens:
    def authenticate(self, token: str) -> Caller | None:
        return TOKENS.get(token)


class Rules:
    """The writer may do anything, the reader only read."""

    def allows(self, caller: Caller, access: Access) -> bool:
        return caller.username == "writer" or access.verb in READ_VERBS


@pytest.fixture
def api() -> Iterator[TestClient]:
    """The app with its state replaced; no lifespan (the test client is not entered), so no watch starts."""
    settings = ApiSettings()
    nowhere = client.ApiClient(client.Configuration(host="http://127.0.0.1:9"))  # never called
    app = create_app(settings, Kube(api=nowhere, custom=None, authn=None, authz=None, timeout=1.0))
    cache = JobCache(cast(Kube, SimpleNamespace(api=None, timeout=5.0)), settings)  # never started: no Kubernetes
    state = AppState(
        settings=settings,
        kube=cast(Kube, None),
        jobs=cast(KubeJobs, Jobs(cache)),
        cache=cache,
        authenticator=cast(Authenticator, Tokens()),
        authorizer=cast(Authorizer, Rules()),
        metrics=ApiMetrics(),
        pod_logs=app.state.trainingjob.pod_logs,
        stream_slots=StreamSlots(1, 1),
        readiness=TtlCache(1.0, 1),
    )
    app.dependency_overrides[get_state] = lambda: state
    yield TestClient(app, headers={"Authorization": "Bearer writer-token"})
    nowhere.close()


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
