"""Liveness, readiness (the cache has synced) and Prometheus metrics; no authentication."""

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel

from trainingjob_api.deps import State

router = APIRouter(tags=["health"])


class Health(BaseModel):
    """How the API is."""

    status: str
    jobs: int | None = None


@router.get("/healthz", response_model=Health, summary="Liveness: the process serves requests")
def healthz() -> Health:
    return Health(status="ok")


@router.get(
    "/readyz",
    response_model=Health,
    responses={503: {"model": Health, "description": "the job cache has not listed every job yet"}},
    summary="Readiness: the job cache has synced with Kubernetes",
)
def readyz(state: State, response: Response) -> Health:
    if not state.cache.synced.is_set():
        response.status_code = 503
        return Health(status="syncing")
    return Health(status="ok", jobs=len(state.cache))


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
    return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)
