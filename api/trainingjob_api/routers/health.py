"""Liveness (open), readiness (open: ready or not) and Prometheus metrics (to callers allowed `get /metrics`, as
Kubernetes' own /metrics and the operator's). Why the API is not ready, and how many jobs its cache holds (of every
tenant), only a caller allowed `get /metrics` reads: not `get /readyz`, which Kubernetes' default RBAC
(system:public-info-viewer) grants everyone."""

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel
from urllib3.exceptions import HTTPError

from trainingjob.kube.reviews import METRICS, Gate
from trainingjob_api.deps import AppState, AuthenticatedCaller, State, require
from trainingjob_api.problems import Problem, unreachable

router = APIRouter(tags=["health"])
NOT_READY = "unavailable"  # what a caller without `get /metrics` reads when the API is not ready


class Health(BaseModel):
    """How the API is."""

    status: str
    jobs: int | None = None
    message: str | None = None
    """Why the API is not ready."""


@router.get(
    "/healthz", response_model=Health, response_model_exclude_none=True, summary="Liveness: the process serves requests"
)
def healthz() -> Health:
    return Health(status="ok")


@router.get(
    "/readyz",
    response_model=Health,
    response_model_exclude_none=True,
    responses={
        503: {"model": Health, "description": "the job cache is not current, or the Kubernetes API server not ready"}
    },
    summary="Readiness: the job cache is synced and watching, the Kubernetes API server answers",
    description="Open to anyone (the kubelet's probe): `ok` or `unavailable`. A caller allowed `get` on the path "
    "/metrics (RBAC nonResourceURLs) also reads why (`syncing`, `stale`, `unreachable` and a message) and `jobs`.",
)
def readyz(state: State, request: Request, response: Response) -> Health:
    health = _health(state)
    if health.status != "ok":
        response.status_code = 503
    gate = Gate(state.authenticator, state.authorizer)  # its refusal: None for a caller allowed get /metrics
    if gate.refusal(request.headers.get("authorization"), METRICS) is None:
        return health
    return Health(status="ok" if health.status == "ok" else NOT_READY)


def _health(state: AppState) -> Health:
    if not state.cache.synced.is_set():
        status, message = "syncing", "the job cache has not listed every job yet"
    elif not state.cache.current.is_set():
        status, message = "stale", "the job cache lost its watch on Kubernetes; it relists once Kubernetes answers"
    else:
        status, message = "unreachable", state.readiness.get_or_compute("apiserver", lambda: _apiserver(state))
    if message:
        return Health(status=status, message=message)
    return Health(status="ok", jobs=len(state.cache))


def _apiserver(state: AppState) -> str:
    """Why the Kubernetes API server is not ready, or "" when its own /readyz says it is."""
    try:
        code = state.kube.readyz(state.settings.readiness_timeout_seconds)
    except HTTPError as error:
        return unreachable(error).problem.message
    return "" if code == 200 else f"the Kubernetes API server is not ready (its /readyz answers HTTP {code})"


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Prometheus text format"},
        401: {"model": Problem, "description": "no bearer token, or one Kubernetes does not accept"},
        403: {"model": Problem, "description": "the caller may not `get` the path /metrics"},
    },
    summary="Prometheus metrics, for callers allowed `get` on the path /metrics (RBAC nonResourceURLs)",
)
def metrics(state: State, caller: AuthenticatedCaller) -> Response:
    require(state, caller, METRICS)
    state.metrics.cache_jobs.set(len(state.cache))
    state.metrics.cache_synced.set(1 if state.cache.synced.is_set() else 0)
    state.metrics.cache_relists.set(state.cache.relists)
    state.metrics.log_streams.set(state.stream_slots.open)
    return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)
