"""kopf's part: it runs the operator's lifecycle (startup, signals, a graceful stop) and calls these hooks, and
observes the cluster's CRDs as it always does; the controller runtime (runtime.controller) does the watching and
reconciling. docs/architecture.md says what kopf does for us and why its own watch streams are not used
(bench/bench_watch.py measures them side by side)."""

import logging
from functools import partial
from typing import Any

import kopf

from trainingjob.kube.client import connect
from trainingjob.kube.reviews import METRICS, Gate, ReviewClients
from trainingjob.runtime.controller import Controller
from trainingjob.runtime.metrics import Metrics
from trainingjob.runtime.metrics_server import MetricsServer
from trainingjob.settings import OperatorSettings

log = logging.getLogger(__name__)
POOL_SIZE = 32  # connections kept open: the parallel writes of every reconcile share them
REVIEW_TIMEOUT = 5.0  # a scrape's TokenReview and SubjectAccessReview, each (a scrape times out in 10 s by default)
# kopf retries its own API calls (its observer of the cluster's CRDs) with these delays; its default grows to 21 s.
# Within a second of the apiserver answering again, for ten minutes; then the operator exits and its Deployment
# restarts it.
KOPF_ERROR_BACKOFFS = [0.2, 0.5] + [1.0] * 600


def health_problem(memo: kopf.Memo) -> str:
    """Why the operator is not healthy ("" when it is): /healthz answers from the event loop, so a wedged loop
    fails it too."""
    controller: Controller | None = getattr(memo, "controller", None)
    return "the controller has not started" if controller is None else controller.problem()


@kopf.on.startup()
async def start(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    options = OperatorSettings()
    # kopf watches the cluster's CRDs whatever it serves (its resource observer): its watch ends every 5 minutes,
    # its errors are retried within a second, and with one namespace it scans nothing cluster-wide.
    settings.watching.server_timeout = 300
    settings.networking.error_backoffs = KOPF_ERROR_BACKOFFS
    settings.scanning.disabled = bool(options.namespace)
    metrics, connection = Metrics(), connect(pool_size=POOL_SIZE, retries=0)
    memo.metrics_server = None
    if options.metrics_port:
        gate = Gate.of(ReviewClients.of(connection.api, REVIEW_TIMEOUT))
        memo.metrics_server = MetricsServer(
            metrics.registry, partial(health_problem, memo), partial(gate.refusal, access=METRICS)
        )
        await memo.metrics_server.start(options.metrics_port)
    memo.controller = Controller(options, connection, metrics)
    await memo.controller.start()
    log.info(
        "trainingjob operator started: namespace=%s metrics_port=%s leader_election=%s",
        options.namespace or "*",
        options.metrics_port,
        options.leader_election,
    )


@kopf.on.cleanup()
async def stop(memo: kopf.Memo, **_: Any) -> None:
    controller: Controller | None = getattr(memo, "controller", None)
    if controller is not None:
        await controller.stop()
    if memo.metrics_server is not None:
        await memo.metrics_server.stop()
