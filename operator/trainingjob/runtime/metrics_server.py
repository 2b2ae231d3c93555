"""The metrics port: GET /metrics (Prometheus' text format) and GET /healthz, nothing else (404).

/metrics names every tenant's jobs, their phases and losses: it answers only a bearer token that Kubernetes accepts
(TokenReview) for a caller it allows `get` on the path /metrics (SubjectAccessReview; the chart's
`<release>-metrics-reader` ClusterRole), as controller-runtime's secure metrics do; 401 or 403 otherwise.
/healthz (liveness: "ok" or what is wrong) stays open for the kubelet's probes.

It is served by aiohttp on the operator's own event loop, so /healthz answers only while that loop runs: a loop
wedged by a blocking call, or a process that lost its reconcile queue or its leader election, fails the probe."""

import asyncio
import logging
import socket
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from trainingjob.kube.reviews import Refusal

log = logging.getLogger(__name__)
# What is wrong with the operator, in a sentence; "" while it is healthy.
Problem = Callable[[], str]
# Why a request with this Authorization header (None: without one) may not read /metrics; None when it may.
# Blocking (it asks Kubernetes): called in a thread. trainingjob.kube.reviews.Gate.refusal, for METRICS.
MetricsGate = Callable[[str | None], Refusal | None]


class MetricsServer:
    """Serves one registry, to callers `gate` lets through, and one health check on a port of the event loop."""

    def __init__(self, registry: CollectorRegistry, problem: Problem, gate: MetricsGate) -> None:
        self._registry = registry
        self._problem = problem
        self._gate = gate
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)

    async def start(self, port: int, host: str = "0.0.0.0") -> int:  # probes reach the pod IP
        """Listen on host:port (0: a free port) and return the port."""
        await self._runner.setup()
        sock = socket.create_server((host, port))
        await web.SockSite(self._runner, sock).start()
        bound: int = sock.getsockname()[1]
        return bound

    async def stop(self) -> None:
        await self._runner.cleanup()

    async def _metrics(self, request: web.Request) -> web.Response:
        refusal = await asyncio.to_thread(self._gate, request.headers.get("Authorization"))
        if refusal is not None:
            headers = {"WWW-Authenticate": 'Bearer realm="trainingjob-operator"'} if refusal.status == 401 else {}
            return web.Response(status=refusal.status, text=refusal.message + "\n", headers=headers)
        # In a thread: with thousands of jobs, writing the text takes a noticeable fraction of a second.
        body = await asyncio.to_thread(generate_latest, self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _healthz(self, _: web.Request) -> web.Response:
        problem = self._problem()
        if problem:
            log.warning("/healthz: %s", problem)
            return web.Response(status=503, text=problem + "\n")
        return web.Response(text="ok\n")
