"""Measuring for bench/bench_kubeflow.py: one side's cluster (Run), a scenario's jobs created (or a rank failed)
and watched until every pod and every status is Running, and the idle window of unchanged jobs."""

import contextlib
import datetime
import math
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from bench import kubeflow
from bench.kubeflow_books import JobBook, PodBook, Watch
from bench.kubeflow_plane import CREATE_THREADS, AuditedControlPlane, AuditLog, reads, writes
from bench.kubeflow_sides import Contender
from kubernetes import client
from testbed import pods
from testbed.namespaces import create_namespace, delete_namespace
from testbed.processes import poll_until


@dataclass(frozen=True)
class Scenario:
    key: str
    title: str
    jobs: int
    ranks: int
    failure: bool = False


@dataclass
class Measurement:
    seconds: float  # the action -> every pod Running
    status_seconds: float | None  # the action -> the last job's status turning Running (None: none changed)
    cpu_seconds: float
    peak_rss_mib: float
    requests: Counter[str]
    lags: list[float]  # per job: its status turned Running minus its last pod turned Running
    unchanged: int  # jobs whose status said Running throughout (no lag to measure)
    control_plane: dict[str, float] = field(default_factory=dict)  # CPU seconds of each control plane server

    @property
    def control_plane_seconds(self) -> float | None:
        return sum(self.control_plane.values()) if self.control_plane else None

    @property
    def reads(self) -> int:
        return reads(self.requests)

    @property
    def writes(self) -> int:
        return writes(self.requests)

    def lag(self, quantile: float) -> float | None:
        if not self.lags:
            return None
        ordered = sorted(self.lags)
        return ordered[max(0, math.ceil(quantile * len(ordered)) - 1)]


@dataclass
class Idle:
    jobs: int
    window: float
    reads: int  # get + list, no watch
    reconciles: int
    requests: Counter[str]


@dataclass
class Results:
    scenarios: list[Scenario]
    sides: list[str]
    measurements: dict[tuple[str, str], list[Measurement]] = field(default_factory=dict)
    idle: dict[str, list[Idle]] = field(default_factory=dict)
    describe: dict[str, str] = field(default_factory=dict)
    orders: list[list[str]] = field(default_factory=list)
    peak_reset: bool = True
    nodes: int = 0


@dataclass
class Run:
    """One side's cluster: the operator, the clients, the audit log, and a namespace counter."""

    contender: Contender
    plane: AuditedControlPlane
    api: client.ApiClient
    audit: AuditLog
    deadline: float
    peak_reset: bool = True
    namespaces: int = 0
    pool: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(max_workers=CREATE_THREADS))

    def fresh_namespace(self, prefix: str) -> str:
        self.namespaces += 1
        name = f"{prefix}-{self.namespaces}"
        create_namespace(client.CoreV1Api(self.api), name)
        return name

    def delete_namespace(self, namespace: str) -> None:
        """Delete its jobs (and wait until they are gone, the operator still running for finalizers and with no pod
        deleted under a live job), then the namespace, and wait until it is gone with every pod in it."""
        core, custom, side = client.CoreV1Api(self.api), client.CustomObjectsApi(self.api), self.contender
        custom.delete_collection_namespaced_custom_object(side.group, side.version, namespace, side.plural)
        poll_until(
            lambda: not custom.list_namespaced_custom_object(side.group, side.version, namespace, side.plural)["items"],
            timeout=self.deadline,
            interval=0.2,
            what=f"the jobs of {namespace} deleted",
        )
        delete_namespace(core, namespace, timeout=self.deadline)

    def create_jobs(self, namespace: str, names: Sequence[str], ranks: int) -> None:
        custom, side = client.CustomObjectsApi(self.api), self.contender

        def create(name: str) -> None:
            custom.create_namespaced_custom_object(
                side.group, side.version, namespace, side.plural, side.manifest(name, ranks)
            )

        list(self.pool.map(create, names))

    def reset_peak(self) -> None:
        """Start the peak RSS (VmHWM) over: writing 5 to clear_refs does that (Linux 4.0+)."""
        try:
            Path(f"/proc/{self.contender.pid()}/clear_refs").write_text("5")
        except OSError:
            self.peak_reset = False

    def close(self) -> None:
        self.pool.shutdown()
        self.audit.close()
        self.api.close()


@contextlib.contextmanager
def watching(run: Run, namespace: str, pod_book: PodBook, job_book: JobBook) -> Iterator[None]:
    """Watch the namespace's pods and the side's jobs into the books, from before anything happens there."""
    core, custom, side = client.CoreV1Api(run.api), client.CustomObjectsApi(run.api), run.contender
    watches = [
        Watch(partial(core.list_namespaced_pod, namespace), pod_book),
        Watch(
            partial(custom.list_namespaced_custom_object, side.group, side.version, namespace, side.plural), job_book
        ),
    ]
    for watch in watches:
        watch.start()
    try:
        yield
    finally:
        for watch in watches:
            watch.stop()


def run_jobs(run: Run, scenario: Scenario, namespace: str) -> Measurement:
    """Create the scenario's jobs (or, for the failure scenario, fail a rank of its running job) and measure."""
    side = run.contender
    pod_book, job_book = PodBook(), JobBook(side.says_running)
    names = [f"job-{index}" for index in range(scenario.jobs)]
    total = scenario.jobs * scenario.ranks
    with watching(run, namespace, pod_book, job_book):
        if scenario.failure:
            run.create_jobs(namespace, names, scenario.ranks)
            wait_all_running(run, pod_book, job_book, total, len(names), what="the job before the failure")
            failed = side.failing_pod(names[0])
            failed_uid = pod_book.uids[failed]
            done = pod_book.expect(lambda b: side.gang_back(b, failed_uid, scenario.ranks))

            def act() -> None:
                pods.finish_pod(client.CoreV1Api(run.api), namespace, failed, 1)
        else:
            done = pod_book.expect(lambda b: len(b.running) >= total)

            def act() -> None:
                run.create_jobs(namespace, names, scenario.ranks)

        run.reset_peak()
        cpu_before, plane_before = kubeflow.process_usage(side.pid()).cpu_seconds, control_plane_cpu(run.plane)
        offset, wall = run.audit.offset(), datetime.datetime.now(datetime.UTC)
        began = time.monotonic()
        act()
        pods_at = pod_book.wait(done, run.deadline, f"{total} pods Running ({scenario.title})")
        statuses = job_book.expect(lambda b: len(b.running) >= len(names))
        job_book.wait(statuses, run.deadline, f"{len(names)} job statuses Running")
        usage, plane_after = kubeflow.process_usage(side.pid()), control_plane_cpu(run.plane)
        counts = run.audit.requests(offset, wall).get(side.user, Counter())
        lags, unchanged = status_lags(pod_book, job_book, names, began)
        changed = [t for t in (job_book.running_since(n, began) for n in names) if t is not None]
    return Measurement(
        seconds=pods_at - began,
        status_seconds=max(changed) - began if changed else None,
        cpu_seconds=usage.cpu_seconds - cpu_before,
        peak_rss_mib=usage.peak_rss_bytes / 2**20,
        requests=counts,
        lags=lags,
        unchanged=unchanged,
        control_plane={name: plane_after[name] - plane_before[name] for name in plane_after},
    )


def control_plane_cpu(plane: AuditedControlPlane) -> dict[str, float]:
    """CPU seconds so far of each server of the cluster tier (etcd, kube-apiserver, the scheduler, ...)."""
    return {s.name: kubeflow.process_usage(s.process.pid).cpu_seconds for s in plane.servers}


def status_lags(pod_book: PodBook, job_book: JobBook, names: Sequence[str], began: float) -> tuple[list[float], int]:
    """Per job whose status turned Running after `began`: that arrival minus its last pod's turning Running; and the
    number of jobs whose status said Running throughout (no lag to measure)."""
    lags, unchanged, gangs = [], 0, pod_book.gangs_complete_at()
    for name in names:
        status_at = job_book.running_since(name, began)
        gang_at = gangs.get(name)
        if status_at is None:
            unchanged += 1
        elif gang_at is not None:
            lags.append(status_at - gang_at)
    return lags, unchanged


def wait_all_running(run: Run, pod_book: PodBook, job_book: JobBook, total: int, jobs: int, *, what: str) -> None:
    pod_book.wait(pod_book.expect(lambda b: len(b.running) >= total), run.deadline, f"{total} pods Running: {what}")
    job_book.wait(job_book.expect(lambda b: len(b.running) >= jobs), run.deadline, f"{jobs} statuses: {what}")


def measure(run: Run, scenario: Scenario) -> Measurement:
    namespace = run.fresh_namespace(scenario.key)
    try:
        return run_jobs(run, scenario, namespace)
    finally:
        run.delete_namespace(namespace)


def warm_up(run: Run) -> None:
    """One small job to Running and gone, not measured: the operator has reconciled once before the clock runs."""
    measure(run, Scenario("warmup", "warm-up", 1, 2))


def measure_idle(run: Run, jobs: int, ranks: int, window: float) -> Idle:
    """`jobs` jobs Running and left alone: the operator's reads (get/list) and reconciles over `window` seconds."""
    side = run.contender
    namespace = run.fresh_namespace("idle")
    pod_book, job_book = PodBook(), JobBook(side.says_running)
    try:
        with watching(run, namespace, pod_book, job_book):
            run.create_jobs(namespace, [f"job-{index}" for index in range(jobs)], ranks)
            wait_all_running(run, pod_book, job_book, jobs * ranks, jobs, what="the idle jobs")
        before, offset, wall = side.reconciles(), run.audit.offset(), datetime.datetime.now(datetime.UTC)
        time.sleep(window)  # the measurement window itself, not a wait for anything
        reconciles = side.reconciles() - before
        counts = run.audit.requests(offset, wall).get(side.user, Counter())
    finally:
        run.delete_namespace(namespace)
    return Idle(jobs, window, reads(counts, ("get", "list")), reconciles, counts)
