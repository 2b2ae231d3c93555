"""Liveness, readiness (the cache is current, the apiserver answers) and Prometheus metrics; no authentication."""

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel
from urllib3.exceptions import HTTPError

from trainingjob_api.deps import AppState, State
from trainingjob_api.problems import unreachable

router = APIRouter(tags=["health"])


class Health(BaseModel):
    """How the API is."""

    status: str
    jobs: int | None = None
    message: str | None = None
    """Why the API is not ready."""


@router.get("/healthz", response_model=Health, summary="Liveness: the process serves requests")
def healthz() -> Health:
    return Health(status="ok")


@router.get(
    "/readyz",
    response_model=Health,
    responses={
        503: {"model": Health, "description": "the job cache is not current, or the Kubernetes API server not ready"}
    },
    summary="Readiness: the job cache is synced and watching, the Kubernetes API server answers",
)
def readyz(state: State, response: Response) -> Health:
    if not state.cache.synced.is_set():
        status, message = "syncing", "the job cache has not listed every job yet"
    elif not state.cache.current.is_set():
        status, message = "stale", "the job cache lost its watch on Kubernetes; it relists once Kubernetes answers"
    else:
        status, message = "unreachable", state.readiness.get_or_compute("apiserver", lambda: _apiserver(state))
    if message:
        response.status_code = 503
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
    responses={200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Prometheus text format"}},
    summary="Prometheus metrics",
)
def metrics(state: State) -> Response:
    state.metrics.cache_jobs.set(len(state.cache))
    state.metrics.cache_synced.set(1 if state.cache.synced.is_set() else 0)
    state.metrics.cache_relists.set(state.cache.relists)
    state.metrics.log_streams.set(state.stream_slots.open)
    return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)
