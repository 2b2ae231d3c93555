"""The controller runtime put together: the informers that fill the operator's memory (one thread each), the two
reconcile queues (jobs, sweeps) on the asyncio loop, the reconciles they run in threads, the shared write pace,
leader election and metrics. kopf starts and stops it (runtime.operator). It writes only while it leads (the
cluster ports are fenced), and steps down by waiting for its reconciles in flight before the Lease goes
(runtime.in_flight)."""

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from kubernetes import client

from trainingjob.children.pod_memory import PodMemory
from trainingjob.kube.agents import operator_key
from trainingjob.kube.answers import is_transient, retry_after
from trainingjob.kube.client import Connection, own_namespace
from trainingjob.kube.job_cluster import KubernetesCluster
from trainingjob.kube.kueue import KubeQueues
from trainingjob.kube.ports import Conflict
from trainingjob.kube.resources import Resources
from trainingjob.kube.room import NodeRoom
from trainingjob.kube.sweep_cluster import KubernetesSweeps
from trainingjob.kube.watch import Informer
from trainingjob.kube.writes import Pacer
from trainingjob.plan import Settings
from trainingjob.reconcile.job import reconcile
from trainingjob.reconcile.status_pace import StatusPace
from trainingjob.runtime.cached import CachedCluster, CachedSweepCluster, FencedQueues, NotLeading
from trainingjob.runtime.in_flight import InFlight, drain, step_down
from trainingjob.runtime.leader import LeaderElector, existing_lease_namespace, lead
from trainingjob.runtime.memory import Stores, sources, store_informer
from trainingjob.runtime.metrics import Metrics
from trainingjob.runtime.queue import Key, ReconcileQueue
from trainingjob.settings import OperatorSettings

log = logging.getLogger(__name__)
CONFLICT_RETRY_SECONDS = 0.2
NOT_LEADING_RETRY_SECONDS = 1.0
DRAIN_SECONDS = 10.0  # the longest a stop waits for reconciles in flight (a pod's termination grace is 30 s)
SWEEP_WORKERS = 2  # sweeps reconcile rarely (when a trial's job changes) and each is small
# After a reconcile, a job rests as long as that reconcile took to decide (at most MAX_REST_SECONDS) before the next:
# to read its memory, observe and plan, on the clock (a busy machine's waits count), without its reads over the
# network (reconcile/job.py Outcome.deciding_seconds). A small job decides in milliseconds, less than the queue's
# batch, so nothing changes for it. A gang of 10,240 decides in about a second and, while its pods come up, is woken
# by their events without pause: its reconciles would run back to back, a core's worth. Resting spends at most half
# of the time on them, handles the events of twice as long in each, and answers a change within two reconciles'
# time. The rest delays all of a gang's next reconcile, the one its plan asked for too (a deadline, a backoff's
# end), by at most that; a resting job holds no worker, so no other job waits for it.
REST_RATIO = 1.0
MAX_REST_SECONDS = 5.0


def plan_settings(options: OperatorSettings) -> Settings:
    return Settings(
        backoff_base_seconds=options.backoff_base_seconds,
        backoff_max_seconds=options.backoff_max_seconds,
        terminating_timeout_seconds=options.terminating_timeout_seconds,
        read_progress=options.read_progress,
        network_policy=options.network_policy,
        operator_namespace=own_namespace(),
        default_trainer_image=options.default_trainer_image,
        in_place_restart=options.in_place_restart,
        in_place_timeout_seconds=options.in_place_timeout_seconds,
        checkpoint_prior_mtbf_seconds=options.checkpoint_prior_mtbf_seconds,
        checkpoint_min_seconds=options.checkpoint_min_seconds,
        checkpoint_max_seconds=options.checkpoint_max_seconds,
        completion_grace_seconds=options.completion_grace_seconds,
        resize_wait_seconds=options.resize_wait_seconds,
        resize_interval_seconds=options.resize_interval_seconds,
    )


def lease_namespace(options: OperatorSettings, api: client.CoordinationV1Api) -> str:
    """The setting; else the operator's own namespace in a pod; else where an installed operator keeps its Lease
    (so a local run defers to it); else the watched namespace, or default."""
    if options.lease_namespace:
        return options.lease_namespace
    return own_namespace() or existing_lease_namespace(api, options.lease_name) or options.namespace or "default"


class Controller:
    """Everything the operator runs, built from its settings and one connection; `start` and `stop` on the loop."""

    def __init__(self, options: OperatorSettings, connection: Connection, metrics: Metrics) -> None:
        self.options, self.connection, self.metrics = options, connection, metrics
        self.stores = Stores()
        pacer = Pacer(options.max_writes_in_flight, on_throttled=metrics.writes_throttled.inc)
        metrics.write_limit.set_function(lambda: pacer.limit)
        resources = Resources(connection.api, pacer=pacer, on_written=self.stores.saw)
        jobs = KubernetesCluster(
            connection.api,
            resources,
            read_progress=options.read_progress,
            window=options.max_writes_in_flight,
            operator_key=operator_key(options.key_file),
        )
        self.elector = self._elector() if options.leader_election else None
        leading = self._leading
        self.jobs = CachedCluster(
            jobs,
            self.stores,
            on_fallback=metrics.cache_fallback_lists.inc,
            may_write=leading,
            on_skipped=lambda event: metrics.events_skipped.labels(event.reason).inc(),
        )
        self.queues = FencedQueues(KubeQueues(connection.api, resources), may_write=leading)
        self.room = NodeRoom(connection.api)
        self.sweeps = CachedSweepCluster(KubernetesSweeps(resources), self.stores, may_write=leading)
        self.plan_settings = plan_settings(options)
        self.pod_memory = PodMemory()
        self.status_pace = StatusPace()
        self.rests: dict[Key, float] = {}  # each job's rest after its last reconcile (job_queue asks once)
        self.gate = asyncio.Event()
        self.in_flight = InFlight(threads=options.workers + SWEEP_WORKERS)  # one for each queue's worker
        self.stepping_down = False  # once set, the gate stays closed whatever the election says
        self.draining: asyncio.Task[list[str]] | None = None  # waiting for reconciles in flight after a lost Lease
        self.job_queue = ReconcileQueue(
            self._in_thread("job", self.reconcile_job),
            workers=options.workers,
            resync_seconds=options.resync_seconds,
            on_depth=metrics.queue_depth.set,
            is_transient=is_transient,
            retry_after=retry_after,
            gate=self.gate,
            batch_seconds=options.batch_seconds,
            rest=lambda key: self.rests.pop(key, 0.0),
            is_new=self._never_started,
        )
        self.sweep_queue = ReconcileQueue(
            self._in_thread("sweep", self.reconcile_sweep),
            workers=SWEEP_WORKERS,
            retry_after=retry_after,
            resync_seconds=options.resync_seconds,
            gate=self.gate,
            batch_seconds=options.sweep_batch_seconds,
        )
        self.informers: list[Informer] = []
        self.leading: asyncio.Task[None] | None = None

    def _elector(self) -> LeaderElector:
        coordination = client.CoordinationV1Api(self.connection.api)
        identity = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        namespace = lease_namespace(self.options, coordination)
        found = not (self.options.lease_namespace or own_namespace())  # not configured: found, and found again
        return LeaderElector(
            coordination,
            namespace,
            self.options.lease_name,
            identity,
            lease_seconds=self.options.lease_duration_seconds,
            find_namespace=(lambda: lease_namespace(self.options, coordination)) if found else None,
        )

    def _in_thread(self, kind: str, work: Callable[[Key], float | None]) -> Callable[[Key], Awaitable[float | None]]:
        """A reconcile for the queue: the Kubernetes client is synchronous, so it runs in a thread of the
        reconciles' own, counted in flight while it runs (a cancelled task's thread runs on)."""

        async def run(key: Key) -> float | None:
            return await self.in_flight.run(f"{kind} {key[0]}/{key[1]}", lambda: work(key))

        return run

    def _never_started(self, key: Key) -> bool:
        """A job whose status names no attempt: its first pass makes its children, a slow one (runtime/lanes.py).
        After a restart or a takeover, the jobs that ran before are not new."""
        manifest = self.stores.jobs.get(*key)
        return manifest is None or not (manifest.get("status") or {}).get("attempt")

    def _leading(self) -> bool:
        return self.elector is None or self.elector.is_leader()

    def reconcile_job(self, key: Key) -> float | None:
        """One job's reconcile (in a thread); the seconds until it wants to run again, None once it is gone."""
        if not self._leading():
            return NOT_LEADING_RETRY_SECONDS
        with self.metrics.reconcile_seconds.time():
            try:
                outcome = reconcile(
                    self.jobs, *key, now=datetime.now(UTC), settings=self.plan_settings,
                    log_tail_lines=self.options.log_tail_lines, queues=self.queues, room=self.room,
                    memory=self.pod_memory, pace=self.status_pace,
                )  # fmt: skip
            except Conflict:  # the job changed while we planned: plan again from the new version
                return CONFLICT_RETRY_SECONDS
            except NotLeading:  # leadership ended during the pass: its remaining writes were not sent
                log.info("%s/%s: not leading any more; the reconcile stopped before its next write", *key)
                return NOT_LEADING_RETRY_SECONDS
        self.rests[key] = min(REST_RATIO * outcome.deciding_seconds, MAX_REST_SECONDS)
        self.metrics.record(key, outcome.before, outcome.after, outcome.job)
        if outcome.after is None:
            return None
        return outcome.requeue_after or self.options.resync_seconds

    def reconcile_sweep(self, key: Key) -> float | None:
        """One sweep's reconcile (in a thread), once the sweeps and their trials are listed."""
        from trainingjob.reconcile.sweep import reconcile_sweep  # noqa: PLC0415  (Optuna loads with the first sweep)

        if not self._leading() or not self.stores.sweeps_synced:
            return NOT_LEADING_RETRY_SECONDS  # not leading, or the sweeps are not (yet) served and listed
        try:
            outcome = reconcile_sweep(self.sweeps, *key, now=datetime.now(UTC))
        except Conflict:
            return CONFLICT_RETRY_SECONDS
        except NotLeading:
            return NOT_LEADING_RETRY_SECONDS
        self.metrics.sweeps.record(key, outcome.after, outcome.metric)
        return None if outcome.after is None else self.options.resync_seconds

    async def start(self) -> None:
        """Start the informers; once the stores a job's reconcile reads hold a whole list, open the gate (or lead)."""
        loop = asyncio.get_running_loop()

        def waking(queue: ReconcileQueue) -> Callable[[set[Key]], None]:
            def wake(keys: set[Key]) -> None:  # from an informer's thread
                loop.call_soon_threadsafe(queue.wake_all, keys)

            return wake

        jobs, sweeps = waking(self.job_queue), waking(self.sweep_queue)
        wakes = (jobs, jobs, jobs, sweeps, sweeps)  # in the order of sources()
        relisted = self.metrics.cache_relists.labels
        self.informers = [
            store_informer(self.connection.api, source, store, wake, on_relist=lambda r: relisted(r).inc())
            for source, store, wake in zip(sources(self.options.namespace), self.stores.all, wakes, strict=True)
        ]
        for informer in self.informers:
            informer.start()
        self.leading = asyncio.create_task(self._open_gate(), name="leader election")

    async def _open_gate(self) -> None:
        while not await asyncio.to_thread(self.stores.wait_synced, 0.5):  # short turns: it can be cancelled
            pass
        if self.elector is None:
            self.gate.set()
            await asyncio.Event().wait()  # nothing more to do; done() stays False while the operator runs
            return
        every, metrics = self.options.lease_renew_seconds, self.metrics

        def lost() -> None:  # the Lease is not ours to give up: the reconciles in flight are fenced and waited for
            metrics.forget_all()
            self.pod_memory.clear()
            self.status_pace.clear()
            self.draining = asyncio.create_task(drain(self.in_flight, "lost the Lease", DRAIN_SECONDS))

        await lead(
            self.elector, self.gate, every, on_lost=lost, on_won=metrics.report_again,
            may_open=lambda: not self.stepping_down,
        )  # fmt: skip

    def problem(self) -> str:
        """Why the operator is not healthy; "" when it is."""
        if self.leading is not None and self.leading.done():
            return "leader election stopped"
        stopped = [i.source.resource for i in self.informers if not i.alive]
        return f"watching {', '.join(stopped)} stopped" if stopped else ""

    async def stop(self) -> None:
        """Stop taking work and wait for the reconciles in flight (the Lease still renewed meanwhile), then stop
        leading, watching and the queues; give the Lease up last, so a standby leads at once and never beside
        a reconcile of this operator."""

        def close() -> None:
            self.stepping_down = True
            self.gate.clear()

        async def stop_the_rest() -> None:
            if self.leading is not None:
                self.leading.cancel()
            for informer in self.informers:
                await asyncio.to_thread(informer.stop)
            await self.job_queue.stop()
            await self.sweep_queue.stop()
            if self.elector is not None:
                await asyncio.to_thread(self.elector.release)

        try:
            await step_down(close, self.in_flight, stop_the_rest, DRAIN_SECONDS)
        finally:
            self.in_flight.close()
            self.connection.close()
