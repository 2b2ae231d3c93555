"""Prometheus metrics of the REST API, in a registry of its own per app."""

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def method_label(method: str) -> str:
    """The request's method as a label value from a closed set: a client's invented methods would each add series
    (anyone may send them, and /metrics grew without bound)."""
    return method if method in METHODS else "other"


class ApiMetrics:
    """Requests by route and status, their latency, and the state of the job cache."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "trainingjob_api_requests_total", "HTTP requests served.", ["method", "route", "status"],
            registry=self.registry,
        )  # fmt: skip
        self.latency = Histogram(
            "trainingjob_api_request_seconds", "Time to the response's headers.", ["method", "route"],
            registry=self.registry,
        )  # fmt: skip
        self.cache_jobs = Gauge("trainingjob_api_cache_jobs", "TrainingJobs in the cache.", registry=self.registry)
        self.cache_synced = Gauge(
            "trainingjob_api_cache_synced", "1 once the cache has listed every job.", registry=self.registry
        )
        self.log_streams = Gauge(
            "trainingjob_api_log_streams", "Log streams being followed, all callers together.", registry=self.registry
        )
        self.cache_relists = Gauge(
            "trainingjob_api_cache_relists", "Full LISTs the cache has made (1 + one per expired watch).",
            registry=self.registry,
        )  # fmt: skip


class MetricsMiddleware:
    """Counts every HTTP request by route and status and times it to its response's headers. Plain ASGI, so
    streamed responses pass through untouched and their end (or the client leaving) reaches the route."""

    def __init__(self, app: ASGIApp, metrics: ApiMetrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        answered = False

        def observe(status: int) -> None:
            route, method = getattr(scope.get("route"), "path", "unmatched"), method_label(scope["method"])
            self.metrics.latency.labels(method, route).observe(time.perf_counter() - start)
            self.metrics.requests.labels(method, route, str(status)).inc()

        async def counted(message: Message) -> None:
            nonlocal answered
            if message["type"] == "http.response.start" and not answered:
                answered = True
                observe(int(message["status"]))
            await send(message)

        try:
            await self.app(scope, receive, counted)
        except Exception:
            if not answered:
                observe(500)
            raise
