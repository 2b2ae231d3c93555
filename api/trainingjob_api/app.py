"""create_app(settings): the FastAPI application, its routers, and the job cache it starts and stops."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI

from trainingjob.kube.reviews import Authenticator, Authorizer, TtlCache
from trainingjob_api import docs, problems
from trainingjob_api.deps import AppState
from trainingjob_api.job_cache import JobCache
from trainingjob_api.kube import Kube
from trainingjob_api.limits import CallerRates
from trainingjob_api.logs import PodLogs, StreamSlots
from trainingjob_api.metrics import ApiMetrics, MetricsMiddleware
from trainingjob_api.routers import activity, dashboard, health, jobs, sweeps, ui
from trainingjob_api.settings import ApiSettings
from trainingjob_api.writes import same_site_writes
from trainingjob_sdk.kube import KubeJobs

DESCRIPTION = """Submit, list and follow TrainingJobs, and TrainingSweeps. Every request carries a Kubernetes bearer
token (`Authorization: Bearer ...`), checked with TokenReview; each request is authorized with a SubjectAccessReview
for the caller's user and groups, as `kubectl` would be. Jobs' lists and reads come from a cache fed by a WATCH:
they are eventually consistent and may trail a write by the watch's latency (typically milliseconds)."""


def build_state(settings: ApiSettings, kube: Kube) -> AppState:
    ttl, size = settings.auth_cache_seconds, settings.auth_cache_size
    return AppState(
        settings=settings,
        kube=kube,
        jobs=KubeJobs(kube.api, timeout=settings.kubernetes_timeout_seconds),  # every call names its namespace
        cache=JobCache(kube, settings),
        authenticator=Authenticator(kube, TtlCache(ttl, size), settings.token_audience),
        authorizer=Authorizer(kube, TtlCache(ttl, size)),
        metrics=ApiMetrics(),
        pod_logs=PodLogs(kube.api.configuration, settings.kubernetes_timeout_seconds),
        stream_slots=StreamSlots(settings.max_log_streams_per_caller, settings.max_log_streams),
        rates=CallerRates(settings.rate_per_second, settings.rate_burst, settings.auth_cache_size),
        readiness=TtlCache(1.0, 1),
    )


def create_app(settings: ApiSettings | None = None, kube: Kube | None = None) -> FastAPI:
    """The REST API; it connects to Kubernetes now and starts watching jobs when it starts serving."""
    settings = settings or ApiSettings()
    state = build_state(settings, kube or Kube.connect(settings))

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        state.cache.start()
        try:
            yield
        finally:
            state.cache.stop()
            await state.pod_logs.aclose()
            state.kube.close()

    app = FastAPI(
        title="TrainingJob API",
        version="v1",
        description=DESCRIPTION,
        lifespan=lifespan,
        dependencies=[Depends(same_site_writes)],  # every POST, PUT, PATCH and DELETE: never from another site
        separate_input_output_schemas=False,
        docs_url=None,  # served by trainingjob_api.docs, without a CDN, to authenticated callers
        redoc_url=None,
        openapi_url=None,  # trainingjob_api.docs serves it, to authenticated callers
    )
    app.state.trainingjob = state
    problems.install(app)
    app.add_middleware(MetricsMiddleware, metrics=state.metrics)
    app.include_router(jobs.router)
    app.include_router(activity.router)
    app.include_router(sweeps.router)
    app.include_router(dashboard.router)
    app.include_router(health.router)
    app.include_router(ui.router)
    docs.install(app)
    return app
