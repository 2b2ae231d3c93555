"""The REST API in process, without Kubernetes, for the unit tier: FastAPI's dependency_overrides put an in-memory
job store (fed into the API's real job cache, as its watch would), a token table and a rule table behind the app's
own dependency (deps.get_state)."""

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any, cast

from fastapi.testclient import TestClient
from kubernetes import client

from trainingjob.kube.impersonation import Headers
from trainingjob.kube.reviews import Access, Authenticator, Authorizer, Caller, TtlCache
from trainingjob_api.app import create_app
from trainingjob_api.deps import AppState, get_state
from trainingjob_api.job_cache import CachedJob, JobCache
from trainingjob_api.kube import Kube
from trainingjob_api.limits import CallerRates
from trainingjob_api.logs import StreamSlots
from trainingjob_api.metrics import ApiMetrics
from trainingjob_api.settings import ApiSettings
from trainingjob_sdk import NotFound
from trainingjob_sdk.kube import KubeJobs

Manifest = dict[str, Any]
NS = "team-a"
JOBS = f"/api/v1/namespaces/{NS}/trainingjobs"
READ_VERBS = {"get", "list", "watch"}
TOKENS = {"writer-token": Caller("writer"), "reader-token": Caller("reader"), "monitor-token": Caller("monitor")}
# What the SDK, tjctl and the dashboard send with every request (trainingjob_api.writes).
SAME_SITE = {"X-Requested-With": "test"}


class Jobs:
    """The jobs of the cluster as the API's KubeJobs sees them; every write also reaches the cache, as its watch
    would tell it."""

    def __init__(self, cache: JobCache) -> None:
        self.cache = cache
        self.stored: dict[tuple[str, str], Manifest] = {}
        self.acted_for: list[Headers] = []  # the impersonation of each write, in order

    def acting_as(self, headers: Headers) -> "Jobs":
        self.acted_for.append(headers)
        return self

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
    """The writer may do anything to jobs, the reader only read them (at the cluster scope too unless a test sets
    `everywhere` false); the monitor may `get /metrics` only."""

    everywhere = True

    def allows(self, caller: Caller, access: Access) -> bool:
        if access.path:  # get /metrics: the monitor's only
            return caller.username == "monitor"
        if caller.username == "writer":
            return True
        return access.verb in READ_VERBS and (self.everywhere or bool(access.namespace))


@contextmanager
def served(headers: dict[str, str] | None = None, settings: ApiSettings | None = None) -> Iterator[TestClient]:
    """The app with its state replaced; no lifespan (the test client is not entered), so no watch starts. Requests
    carry `headers`: by default the writer's token and the header that every client sends with a write."""
    settings = settings or ApiSettings()
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
        rates=CallerRates(settings.rate_per_second, settings.rate_burst),
        readiness=TtlCache(1.0, 1, clock=lambda: 0.0),  # what a test says of the apiserver holds however slow it runs
    )
    app.dependency_overrides[get_state] = lambda: state
    app.state.trainingjob = state  # for tests that change it
    yield TestClient(app, headers={"Authorization": "Bearer writer-token", **SAME_SITE} if headers is None else headers)
    nowhere.close()
