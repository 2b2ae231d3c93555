"""Prometheus metrics of the REST API, in a registry of its own per app."""

import time
from collections.abc import Awaitable, Callable

from fastapi import Request, Response
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


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
        self.cache_relists = Gauge(
            "trainingjob_api_cache_relists", "Full LISTs the cache has made (1 + one per expired watch).",
            registry=self.registry,
        )  # fmt: skip

    async def middleware(self, request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        start = time.perf_counter()
        response = await call_next(request)
        route = getattr(request.scope.get("route"), "path", "unmatched")
        self.latency.labels(request.method, route).observe(time.perf_counter() - start)
        self.requests.labels(request.method, route, str(response.status_code)).inc()
        return response
