"""The kopf layer: startup wiring, leader election, and the informers whose watch events wake a job's reconcile
loop. kopf runs the operator's lifecycle; jobs, pods and Services are watched by our informers (informer.py), which
keep the stores every reconcile reads from, so kopf watches nothing itself."""

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import kopf
import urllib3
from kubernetes import client, config

from trainingjob.kube.cluster import KubernetesCluster
from trainingjob.kube.informer import Informer, sources
from trainingjob.kube.ports import Conflict
from trainingjob.model import GROUP
from trainingjob.plan import Settings
from trainingjob.reconcile.job import reconcile
from trainingjob.runtime.cached import CachedCluster, CachedSweepCluster, Stores
from trainingjob.runtime.leader import LeaderElector, existing_lease_namespace
from trainingjob.runtime.metrics import Metrics, SweepMetrics
from trainingjob.runtime.metrics_server import MetricsServer
from trainingjob.runtime.queue import Key, ReconcileQueue
from trainingjob.runtime.writes import Pacer
from trainingjob.settings import OperatorSettings

log = logging.getLogger(__name__)
CONFLICT_RETRY_SECONDS = 0.2
NOT_LEADING_RETRY_SECONDS = 1.0
SWEEP_WORKERS = 2  # sweeps reconcile rarely (when a trial's job changes) and each is small
# kopf retries API errors with these delays (its default grows to 21 s): a watch reconnects within a second of
# the apiserver answering again, for ten minutes, after which the operator exits and its Deployment restarts it.
WATCH_ERROR_BACKOFFS = [0.2, 0.5] + [1.0] * 600
IN_CLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def _own_namespace() -> str:
    """The operator's namespace when it runs in a pod; "" outside the cluster."""
    return IN_CLUSTER_NAMESPACE.read_text().strip() if IN_CLUSTER_NAMESPACE.is_file() else ""


def _api_client() -> client.ApiClient:
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    configuration = client.Configuration.get_default_copy()
    configuration.connection_pool_maxsize = 32
    configuration.retries = 0  # the queue retries, with its own backoff
    return client.ApiClient(configuration)


def is_transient(error: Exception) -> bool:
    """The apiserver is unreachable, overloaded or restarting: retry soon."""
    if isinstance(error, client.ApiException):
        return error.status is None or error.status in (429, 500, 502, 503, 504)
    return isinstance(error, OSError | urllib3.exceptions.HTTPError | TimeoutError)


def _lease_namespace(options: OperatorSettings, api: client.CoordinationV1Api) -> str:
    """The setting; else the operator's own namespace in a pod; else where an installed operator keeps its Lease
    (so a local run defers to it); else the watched namespace, or default."""
    if options.lease_namespace:
        return options.lease_namespace
    return _own_namespace() or existing_lease_namespace(api, options.lease_name) or options.namespace or "default"


def _plan_settings(options: OperatorSettings) -> Settings:
    return Settings(
        backoff_base_seconds=options.backoff_base_seconds,
        backoff_max_seconds=options.backoff_max_seconds,
        terminating_timeout_seconds=options.terminating_timeout_seconds,
        read_progress=options.read_progress,
        network_policy=options.network_policy,
        operator_namespace=_own_namespace(),
        default_trainer_image=options.default_trainer_image,
    )


async def _lead(elector: LeaderElector, gate: asyncio.Event, every: float, metrics: Metrics, stores: Stores) -> None:
    """Once the stores hold a whole list of every kind, keep trying to lead; open the gate while leading, close it
    as soon as leadership may be lost (and stop reporting on jobs: the new leader does)."""
    await _synced(stores)
    while True:
        try:
            leading = await asyncio.to_thread(elector.try_once)
        except Exception:  # never let the election loop die: a dead loop would keep the gate as it was
            log.exception("leader election failed; retrying")
            leading = elector.is_leader()
        if leading and not gate.is_set():
            metrics.report_again()
            gate.set()
        elif not leading and gate.is_set():
            log.warning("not leading any more: reconciles stop until the Lease is held again")
            gate.clear()
            metrics.forget_all()
        await asyncio.sleep(every)


async def _synced(stores: Stores) -> None:
    """Return once the stores hold a whole list of every kind (waiting in short turns, so it can be cancelled)."""
    while not await asyncio.to_thread(stores.wait_synced, 0.5):
        pass


async def _open_when_synced(gate: asyncio.Event, stores: Stores) -> None:
    """Without leader election: reconcile once the stores are filled."""
    await _synced(stores)
    gate.set()


def _health_problem(memo: kopf.Memo) -> str:
    """Why the operator is not healthy ("" when it is): /healthz answers from the event loop, so a wedged loop
    fails it too."""
    if getattr(memo, "queue", None) is None:
        return "the reconcile queue has not started"
    leading = getattr(memo, "leading", None)
    if leading is not None and leading.done():
        return "leader election stopped"
    stopped = [i.source.resource for i in getattr(memo, "informers", ()) if not i.alive]
    return f"watching {', '.join(stopped)} stopped" if stopped else ""


def _sweep_queue(
    options: OperatorSettings,
    direct: KubernetesCluster,
    stores: Stores,
    elector: LeaderElector | None,
    gate: asyncio.Event,
    *,
    metrics: SweepMetrics,
) -> ReconcileQueue:
    """The sweeps' own reconcile loop, behind the same leadership gate as the jobs'. It waits for the sweep and
    trial stores to hold a whole list (a cluster without the TrainingSweep CRD never fills them: jobs run, sweeps
    wait)."""
    cluster = CachedSweepCluster(direct, stores)

    def reconcile_now(key: Key) -> float | None:
        from trainingjob.reconcile.sweep import reconcile_sweep  # noqa: PLC0415  (Optuna loads with the first sweep)

        if (elector is not None and not elector.is_leader()) or not stores.sweeps_synced:
            return NOT_LEADING_RETRY_SECONDS  # not leading, or the sweeps are not (yet) served and listed
        try:
            outcome = reconcile_sweep(cluster, *key, now=datetime.now(UTC))
        except Conflict:
            return CONFLICT_RETRY_SECONDS
        metrics.record(key, outcome.after, outcome.metric)
        return None if outcome.after is None else options.resync_seconds

    async def run(key: Key) -> float | None:
        return await asyncio.to_thread(reconcile_now, key)

    return ReconcileQueue(run, workers=SWEEP_WORKERS, resync_seconds=options.resync_seconds, gate=gate)


def _informers(
    api: client.ApiClient,
    namespace: str,
    stores: Stores,
    queues: tuple[ReconcileQueue, ReconcileQueue],
    metrics: Metrics,
) -> list[Informer]:
    """One informer per source: the jobs', pods' and Services' changes wake jobs; the sweeps' and the trials' jobs'
    changes wake sweeps."""
    loop = asyncio.get_running_loop()

    def waking(queue: ReconcileQueue) -> Callable[[set[Key]], None]:
        def wake(keys: set[Key]) -> None:  # from an informer's thread
            loop.call_soon_threadsafe(queue.wake_all, keys)

        return wake

    jobs, sweeps = (waking(queue) for queue in queues)
    wakes = (jobs, jobs, jobs, sweeps, sweeps)  # in the order of informer.sources

    def relisted(resource: str) -> None:
        metrics.cache_relists.labels(resource).inc()

    return [
        Informer(api, source, store, wake, on_relist=relisted)
        for source, store, wake in zip(sources(namespace), stores.all, wakes, strict=True)
    ]


@kopf.on.startup()
async def start(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    options = OperatorSettings()
    settings.posting.enabled = False  # our own Events, from the plan
    settings.persistence.finalizer = f"{GROUP}/operator"
    settings.watching.server_timeout = 300
    settings.networking.error_backoffs = WATCH_ERROR_BACKOFFS
    settings.scanning.disabled = bool(options.namespace)  # one namespace: no cluster-wide CRD/namespace scans
    metrics = Metrics()
    memo.metrics_server = None
    if options.metrics_port:
        memo.metrics_server = MetricsServer(metrics.registry, partial(_health_problem, memo))
        await memo.metrics_server.start(options.metrics_port)
    api = _api_client()
    stores = Stores()
    pacer = Pacer(options.max_writes_in_flight, on_throttled=metrics.writes_throttled.inc)
    metrics.write_limit.set_function(lambda: pacer.limit)
    direct = KubernetesCluster(
        api,
        read_progress=options.read_progress,
        on_written=stores.saw,
        parallelism=options.max_writes_in_flight,
        pacer=pacer,
    )
    cluster = CachedCluster(direct, stores, on_fallback=metrics.cache_fallback_lists.inc)
    gate = asyncio.Event()
    elector = None
    if options.leader_election:
        identity = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        coordination = client.CoordinationV1Api(api)
        elector = LeaderElector(
            coordination,
            _lease_namespace(options, coordination),
            options.lease_name,
            identity,
            lease_seconds=options.lease_duration_seconds,
        )
        memo.leading = asyncio.create_task(
            _lead(elector, gate, options.lease_renew_seconds, metrics, stores), name="leader election"
        )
    else:
        memo.opening = asyncio.create_task(_open_when_synced(gate, stores), name="waiting for the stores")
    memo.elector = elector
    plan_settings = _plan_settings(options)

    def reconcile_now(key: Key) -> float | None:
        if elector is not None and not elector.is_leader():
            return NOT_LEADING_RETRY_SECONDS
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
            except Conflict:  # the job changed while we planned: plan again from the new version
                return CONFLICT_RETRY_SECONDS
        metrics.record(key, outcome.before, outcome.after, outcome.job)
        if outcome.after is None:
            return None
        return outcome.requeue_after or options.resync_seconds

    async def run(key: Key) -> float | None:
        return await asyncio.to_thread(reconcile_now, key)

    memo.queue = queue = ReconcileQueue(
        run,
        workers=options.workers,
        resync_seconds=options.resync_seconds,
        on_depth=metrics.queue_depth.set,
        is_transient=is_transient,
        gate=gate,
        batch_seconds=options.batch_seconds,
    )
    memo.sweep_queue = _sweep_queue(options, direct, stores, elector, gate, metrics=metrics.sweeps)
    memo.informers = _informers(api, options.namespace, stores, (queue, memo.sweep_queue), metrics)
    for informer in memo.informers:
        informer.start()
    log.info(
        "trainingjob operator started: namespace=%s metrics_port=%s leader_election=%s",
        options.namespace or "*",
        options.metrics_port,
        options.leader_election,
    )


@kopf.on.cleanup()
async def stop(memo: kopf.Memo, **_: Any) -> None:
    for task in (getattr(memo, "leading", None), getattr(memo, "opening", None)):
        if task is not None:
            task.cancel()
    for informer in getattr(memo, "informers", ()):  # first: no more wake-ups
        await asyncio.to_thread(informer.stop)
    await memo.queue.stop()
    await memo.sweep_queue.stop()
    if memo.elector is not None:
        await asyncio.to_thread(memo.elector.release)
    if memo.metrics_server is not None:
        await memo.metrics_server.stop()
