"""The kopf layer: startup wiring, and watch events that wake a job's reconcile loop. Nothing else."""

import asyncio
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import kopf
from kubernetes import client, config
from prometheus_client import start_http_server

from trainingjob.cluster import KubernetesCluster
from trainingjob.metrics import Metrics
from trainingjob.model import GROUP, PLURAL, VERSION
from trainingjob.naming import JOB_LABEL
from trainingjob.plan import Settings
from trainingjob.queue import Key, ReconcileQueue
from trainingjob.reconcile import reconcile
from trainingjob.settings import OperatorSettings

log = logging.getLogger(__name__)
CONFLICT_RETRY_SECONDS = 0.2


def _api_client() -> client.ApiClient:
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    configuration = client.Configuration.get_default_copy()
    configuration.connection_pool_maxsize = 32
    return client.ApiClient(configuration)


@kopf.on.startup()
async def start(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    options = OperatorSettings()
    settings.posting.enabled = False  # our own Events, from the plan
    settings.persistence.finalizer = f"{GROUP}/operator"
    settings.watching.server_timeout = 300
    settings.scanning.disabled = bool(options.namespace)  # one namespace: no cluster-wide CRD/namespace scans
    metrics = Metrics()
    if options.metrics_port:
        start_http_server(options.metrics_port, registry=metrics.registry)
    cluster = KubernetesCluster(_api_client(), read_progress=options.read_progress)
    plan_settings = Settings(options.backoff_base_seconds, options.backoff_max_seconds)

    def reconcile_now(key: Key) -> float | None:
        namespace, name = key
        with metrics.reconcile_seconds.time():
            try:
                outcome = reconcile(
                    cluster,
                    namespace,
                    name,
                    now=datetime.now(UTC),
                    settings=plan_settings,
                    log_tail_lines=options.log_tail_lines,
                )
            except client.ApiException as error:
                if error.status == 409:  # the job changed while we planned: plan again from the new version
                    return CONFLICT_RETRY_SECONDS
                raise
        metrics.record(key, outcome.before, outcome.after)
        if outcome.after is None:
            return None
        return outcome.requeue_after or options.resync_seconds

    async def run(key: Key) -> float | None:
        return await asyncio.to_thread(reconcile_now, key)

    memo.queue = ReconcileQueue(
        run, workers=options.workers, resync_seconds=options.resync_seconds, on_depth=metrics.queue_depth.set
    )
    log.info(
        "trainingjob operator started: namespace=%s metrics_port=%s",
        options.namespace or "*",
        options.metrics_port,
    )


@kopf.on.cleanup()
async def stop(memo: kopf.Memo, **_: Any) -> None:
    await memo.queue.stop()


@kopf.on.event(GROUP, VERSION, PLURAL)
async def job_changed(name: str, namespace: str | None, memo: Any, **_: Any) -> None:
    memo.queue.wake((namespace or "", name))


@kopf.on.event("", "v1", "pods", labels={JOB_LABEL: kopf.PRESENT})
async def pod_changed(labels: Mapping[str, str], namespace: str | None, memo: Any, **_: Any) -> None:
    memo.queue.wake((namespace or "", labels[JOB_LABEL]))
