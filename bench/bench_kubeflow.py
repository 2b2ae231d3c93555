"""Benchmark: our operator against Kubeflow's training-operator (v1, PyTorchJob) on the cluster tier, alternating.

Run: python bench/bench_kubeflow.py [--repetitions N] [--scale F] [--write-doc] (needs TJ_CONTROLPLANE_BIN, as
`make bench-kubeflow` sets; builds Kubeflow with scripts/build-kubeflow.sh on first use). `--help` lists the size
flags. Each side runs in a cluster tier of its own (etcd, kube-apiserver with an audit log, scheduler,
controller-manager, kwok with enough fake nodes), one side at a time, the order rotated every repetition.

Sides: our operator (TJ_OPERATOR_WORKERS=8), Kubeflow unthrottled and Kubeflow with its default client rate limit
(both --controller-threads=8). Scenarios, each in a fresh namespace that is deleted (and waited out) after it:
  1. 1 job x 1,024 ranks created: -> every pod Running.
  2. 1,000 jobs x 8 ranks created at once from a thread pool: -> all 8,000 pods Running.
  3. a 256-rank job Running, one rank's pod marked Failed (exit code 1): -> every rank Running again.
Per scenario and side: wall time, operator CPU seconds and peak RSS, the apiserver requests of the operator's own
user (from the audit log), and the status lag of each job (its last pod Running -> its status saying Running).
Then "apiserver reads per reconcile of an unchanged job": 20 jobs x 2 ranks Running, 20 s window.
Prints a table of medians and ratios; --write-doc regenerates docs/performance.md.
"""

import argparse
import contextlib
import datetime
import importlib.metadata
import json
import math
import os
import platform
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "operator")]

from bench import kubeflow  # noqa: E402
from kubernetes import client, config  # noqa: E402
from tests.integration.conftest import install_crd as install_trainingjob_crd  # noqa: E402
from tests.support import kwok, pods  # noqa: E402
from tests.support.controlplane import Binaries, ControlPlane, node_ready  # noqa: E402
from tests.support.namespaces import create_namespace  # noqa: E402
from tests.support.operator import OperatorProcess  # noqa: E402
from tests.support.processes import Server, poll_until  # noqa: E402

import trainingjob  # noqa: E402
from trainingjob.model import GROUP, PLURAL, VERSION  # noqa: E402
from trainingjob.naming import ATTEMPT_LABEL  # noqa: E402

Json = dict[str, Any]
OURS, KF_UNTHROTTLED, KF_DEFAULT = "ours", "kubeflow-unthrottled", "kubeflow-default"
SIDES = (OURS, KF_UNTHROTTLED, KF_DEFAULT)
OURS_USER, KUBEFLOW_USER, MARKER_USER = "trainingjob-operator", "kubeflow-operator", "bench-marker"
IMAGE = "ghcr.io/trainingjob/trainer:0.1.0"  # kwok runs no containers: any name will do
READ_VERBS = ("get", "list", "watch")
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
DOC = REPO / "docs" / "performance.md"
CREATE_THREADS = 16
PODS_PER_NODE = 600
AUDIT_POLICY = f"""apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  users: ["{OURS_USER}", "{KUBEFLOW_USER}", "{MARKER_USER}"]
- level: None
"""


# --- the cluster tier, audited -------------------------------------------------------------------------------------


class AuditedControlPlane(ControlPlane):
    """The cluster tier with an audit log of the operators' users (Metadata level, RequestReceived omitted) and the
    scheduler's client rate limit raised, so that binding pods is not what both sides wait for."""

    def __init__(self, root: Path, binaries: Binaries, *, scheduler_qps: int) -> None:
        super().__init__(root, binaries, cluster=True)
        self.scheduler_qps = scheduler_qps
        self.audit_log = root / "audit.log"
        self.audit_policy = root / "audit-policy.yaml"
        self.audit_policy.write_text(AUDIT_POLICY)

    def _listen_args(self) -> list[str]:
        return [
            *super()._listen_args(),
            f"--audit-policy-file={self.audit_policy}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json",
            "--audit-log-mode=blocking",
            "--audit-log-maxsize=1000000",  # megabytes: never rotated during a run
        ]

    def _serve(self, name: str, args: list[str]) -> Server:
        if name == "kube-scheduler" and self.scheduler_qps:
            args = [*args, f"--kube-api-qps={self.scheduler_qps}", f"--kube-api-burst={2 * self.scheduler_qps}"]
        return super()._serve(name, args)


def add_nodes(core: client.CoreV1Api, count: int) -> None:
    """`count` more kwok nodes of PODS_PER_NODE pods each (and CPU to match), waited for until Ready."""
    names = []
    for index in range(count):
        node = kwok.gpu_node(f"bench-node-{index}", f"127.0.12.{index + 1}")
        capacity = dict(node["status"]["capacity"], pods=str(PODS_PER_NODE), cpu="1000", memory="4Ti")
        node["status"]["capacity"] = node["status"]["allocatable"] = capacity
        core.create_node(node)
        names.append(node["metadata"]["name"])
    poll_until(lambda: all(node_ready(core, n) for n in names), timeout=120, what=f"{count} kwok nodes Ready")


def api_client(kubeconfig: Path) -> client.ApiClient:
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = 2 * CREATE_THREADS
    return client.ApiClient(configuration)


# --- the audit log --------------------------------------------------------------------------------------------------


class AuditLog:
    """Reads the apiserver's audit log from an offset: each request once (by auditID), by user and 'verb resource'."""

    def __init__(self, path: Path, api: client.ApiClient, marker_kubeconfig: Path) -> None:
        self.path = path
        self.marker = api_client(marker_kubeconfig)
        self.markers = 0

    def offset(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def requests(self, offset: int, start: datetime.datetime) -> dict[str, Counter[str]]:
        """Requests received from `start` until now, as far as the log has them: a request of the marker user is
        sent now, and the log is read until it shows up (the apiserver writes events in blocking mode)."""
        self.markers += 1
        name = f"bench-marker-{self.markers}"
        end = datetime.datetime.now(datetime.UTC)
        with contextlib.suppress(client.ApiException):  # 404: only its audit event matters
            client.CoreV1Api(self.marker).read_namespace(name)
        seen: dict[str, tuple[str, str]] = {}
        position = offset

        def read_more() -> bool:
            nonlocal position
            with self.path.open("rb") as file:
                file.seek(position)
                data = file.read()
            complete = data.rfind(b"\n") + 1
            position += complete
            found = False
            for line in data[:complete].splitlines():
                event = json.loads(line)
                user = event["user"]["username"]
                reference = event.get("objectRef") or {}
                if user == MARKER_USER:
                    found = found or reference.get("name") == name
                    continue
                received = datetime.datetime.fromisoformat(event["requestReceivedTimestamp"])
                if start <= received <= end:
                    seen.setdefault(event["auditID"], (user, request_key(event)))
            return found

        poll_until(read_more, timeout=120, interval=0.05, what="the audit log to record the end-of-window marker")
        counts: dict[str, Counter[str]] = {}
        for user, key in seen.values():
            counts.setdefault(user, Counter())[key] += 1
        return counts

    def close(self) -> None:
        self.marker.close()


def request_key(event: Json) -> str:
    reference = event.get("objectRef")
    if not reference:
        return f"{event['verb']} {event['requestURI'].split('?')[0]}"
    resource = reference.get("resource", "?")
    if reference.get("subresource"):
        resource += "/" + reference["subresource"]
    return f"{event['verb']} {resource}"


def reads(counts: Counter[str], verbs: Sequence[str] = READ_VERBS) -> int:
    return sum(n for key, n in counts.items() if key.split(" ")[0] in verbs)


def writes(counts: Counter[str]) -> int:
    return sum(n for key, n in counts.items() if key.split(" ")[0] in WRITE_VERBS)


# --- watches --------------------------------------------------------------------------------------------------------


class Waiter:
    """A condition over a book, checked by the watch thread after every event; `at` is the event's arrival."""

    def __init__(self, predicate: Callable[[Any], bool]) -> None:
        self.predicate = predicate
        self.at: float | None = None
        self.done = threading.Event()


class Book:
    """What a watch has seen, updated by its thread; waiters are told (with the arrival time) when they hold."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.waiters: list[Waiter] = []
        self.error: BaseException | None = None

    def apply(self, kind: str, obj: Json, at: float) -> None:
        raise NotImplementedError

    def replace(self, items: list[Json], at: float) -> None:
        raise NotImplementedError

    def event(self, kind: str, obj: Json, at: float) -> None:
        with self.lock:
            self.apply(kind, obj, at)
            self._check(at)

    def relisted(self, items: list[Json], at: float) -> None:
        with self.lock:
            self.replace(items, at)
            self._check(at)

    def _check(self, at: float) -> None:
        for waiter in [w for w in self.waiters if w.predicate(self)]:
            waiter.at = at
            waiter.done.set()
            self.waiters.remove(waiter)

    def fail(self, error: BaseException) -> None:
        with self.lock:
            self.error = error
            for waiter in self.waiters:
                waiter.done.set()

    def expect(self, predicate: Callable[[Any], bool]) -> Waiter:
        waiter = Waiter(predicate)
        with self.lock:
            if self.error is not None:
                raise RuntimeError("the watch stopped") from self.error
            if predicate(self):
                waiter.at = time.monotonic()
                waiter.done.set()
            else:
                self.waiters.append(waiter)
        return waiter

    def wait(self, waiter: Waiter, timeout: float, what: str) -> float:
        if not waiter.done.wait(timeout):
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        if waiter.at is None:
            raise RuntimeError(f"the watch stopped while waiting for {what}") from self.error
        return waiter.at


@dataclass
class PodState:
    name: str
    owner: str
    attempt: str | None
    running: bool = False
    running_since: float | None = None  # when the watch first saw it Running


class PodBook(Book):
    """Pods of one namespace: which run (phase Running, not being deleted) and since when."""

    def __init__(self) -> None:
        super().__init__()
        self.pods: dict[str, PodState] = {}
        self.uids: dict[str, str] = {}
        self.running: set[str] = set()
        self.running_by_attempt: Counter[str | None] = Counter()

    def apply(self, kind: str, obj: Json, at: float) -> None:
        meta = obj["metadata"]
        uid = meta["uid"]
        state = self.pods.get(uid)
        if state is None:
            owners = meta.get("ownerReferences") or [{}]
            attempt = (meta.get("labels") or {}).get(ATTEMPT_LABEL)
            state = self.pods[uid] = PodState(meta["name"], owners[0].get("name", ""), attempt)
            self.uids[state.name] = uid
        running = kind != "DELETED" and (obj.get("status") or {}).get("phase") == "Running"
        running = running and not meta.get("deletionTimestamp")
        if running and state.running_since is None:
            state.running_since = at
        if running != state.running:
            state.running = running
            (self.running.add if running else self.running.discard)(uid)
            self.running_by_attempt[state.attempt] += 1 if running else -1
        if kind == "DELETED":
            del self.pods[uid]
            if self.uids.get(state.name) == uid:
                del self.uids[state.name]

    def replace(self, items: list[Json], at: float) -> None:
        present = {item["metadata"]["uid"] for item in items}
        for uid in [u for u in self.pods if u not in present]:
            self.apply("DELETED", {"metadata": {"uid": uid, "name": self.pods[uid].name}}, at)
        for item in items:
            self.apply("MODIFIED", item, at)

    def gangs_complete_at(self) -> dict[str, float]:
        """Per owner (job): when the last of its running pods became Running."""
        with self.lock:
            latest: dict[str, float] = {}
            for pod in self.pods.values():
                if pod.running and pod.running_since is not None:
                    latest[pod.owner] = max(latest.get(pod.owner, 0.0), pod.running_since)
            return latest


class JobBook(Book):
    """Jobs of one namespace: whether each one's status says Running, and when that changed."""

    def __init__(self, says_running: Callable[[Json], bool]) -> None:
        super().__init__()
        self.says_running = says_running
        self.running: set[str] = set()
        self.changes: dict[str, list[tuple[float, bool]]] = {}

    def apply(self, kind: str, obj: Json, at: float) -> None:
        name = obj["metadata"]["name"]
        running = kind != "DELETED" and self.says_running(obj)
        changes = self.changes.setdefault(name, [])
        if not changes or changes[-1][1] != running:
            changes.append((at, running))
        (self.running.add if running else self.running.discard)(name)

    def replace(self, items: list[Json], at: float) -> None:
        present = {item["metadata"]["name"] for item in items}
        for name in [n for n in self.running if n not in present]:
            self.apply("DELETED", {"metadata": {"name": name}}, at)
        for item in items:
            self.apply("MODIFIED", item, at)

    def running_since(self, name: str, after: float) -> float | None:
        """When the job's status last turned to Running, if it says Running and that was after `after`."""
        with self.lock:
            changes = self.changes.get(name, [])
            if not changes or not changes[-1][1] or changes[-1][0] < after:
                return None
            return changes[-1][0]


Lister = Callable[..., Any]  # a typed client's list_namespaced_* method, bound to the namespace's arguments


class Watch(threading.Thread):
    """One list+watch of a collection, streamed as raw JSON lines into a Book (no model deserialization)."""

    def __init__(self, lister: Lister, book: Book) -> None:
        super().__init__(daemon=True, name="bench watch")
        self.lister, self.book = lister, book
        self.stopping = threading.Event()
        self.response: Any = None
        self.version = self._list()

    def _list(self) -> str:
        listed = json.loads(self.lister(_preload_content=False).data)
        self.book.relisted(listed["items"], time.monotonic())
        return str(listed["metadata"]["resourceVersion"])

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                self.response = self.lister(
                    watch=True,
                    resource_version=self.version,
                    allow_watch_bookmarks=True,
                    timeout_seconds=600,
                    _preload_content=False,
                    _request_timeout=(10, 900),  # the server ends it after 600 s
                )
                self._stream(self.response)
        except BaseException as error:
            if not self.stopping.is_set():
                self.book.fail(error)

    def _stream(self, response: Any) -> None:
        pending = b""
        for chunk in response.stream(1 << 16):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line.strip():
                    self._handle(json.loads(line))

    def _handle(self, event: Json) -> None:
        kind, obj = event["type"], event["object"]
        if kind == "ERROR":
            if obj.get("code") == 410:  # too old: list again
                self.version = self._list()
                return
            raise RuntimeError(f"watch: {obj}")
        self.version = obj["metadata"]["resourceVersion"]
        if kind != "BOOKMARK":
            self.book.event(kind, obj, time.monotonic())

    def stop(self) -> None:
        self.stopping.set()
        if self.response is not None:
            with contextlib.suppress(Exception):
                self.response.shutdown()
            with contextlib.suppress(Exception):
                self.response.release_conn()
        self.join(timeout=10)


@contextlib.contextmanager
def watching(run: "Run", namespace: str, pod_book: "PodBook", job_book: "JobBook") -> Iterator[None]:
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


# --- the two operators ----------------------------------------------------------------------------------------------


class Contender:
    """One side: how to run the operator, write its job, and read its job's status."""

    key: str
    user: str
    group: str
    version: str
    plural: str
    restart_for_idle = False
    all_logs: list[Path]

    def start(self, plane: ControlPlane, log_dir: Path, *, idle: bool = False) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def pid(self) -> int:
        raise NotImplementedError

    def reconciles(self) -> int:
        raise NotImplementedError

    def logs(self) -> list[Path]:
        raise NotImplementedError

    def manifest(self, name: str, ranks: int) -> Json:
        raise NotImplementedError

    def says_running(self, job: Json) -> bool:
        raise NotImplementedError

    def failing_pod(self, job: str) -> str:
        """The pod of rank 1 of the job's first attempt."""
        raise NotImplementedError

    def gang_back(self, book: PodBook, failed_uid: str, ranks: int) -> bool:
        """Every rank Running again after `failed_uid` failed."""
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


class Ours(Contender):
    key, user, group, version, plural = OURS, OURS_USER, GROUP, VERSION, PLURAL
    restart_for_idle = True  # the reads-per-reconcile window runs it with TJ_OPERATOR_RESYNC_SECONDS=1

    def __init__(self, workers: int) -> None:
        self.settings = {
            "TJ_OPERATOR_WORKERS": str(workers),
            "TJ_OPERATOR_RESYNC_SECONDS": "60",  # the default
            "TJ_OPERATOR_BACKOFF_BASE_SECONDS": "0.1",  # default 10: would add 10 s to every restart
            "TJ_OPERATOR_BACKOFF_MAX_SECONDS": "300",  # the default
            "TJ_OPERATOR_LEADER_ELECTION": "false",  # one replica, as Kubeflow runs (its default)
            "TJ_OPERATOR_READ_PROGRESS": "true",  # the default
        }
        self.process: OperatorProcess | None = None
        self.all_logs: list[Path] = []

    def start(self, plane: ControlPlane, log_dir: Path, *, idle: bool = False) -> None:
        kubeconfig = plane.user_kubeconfig(self.user, ("system:masters",))
        extra = {"TJ_OPERATOR_RESYNC_SECONDS": "1"} if idle else {}
        log_dir = log_dir / ("ours-idle" if idle else "ours")  # each start logs to operator-1.log
        log_dir.mkdir(exist_ok=True)
        process = self.process = OperatorProcess(kubeconfig, log_dir, **(self.settings | extra))
        process.start()
        assert process.server is not None
        self.all_logs.append(process.server.log_path)
        server = process.server

        def answering() -> bool:
            server.check_alive()
            return process.reconciles() >= 0

        poll_until(answering, timeout=120, what="our operator's /metrics")

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None

    def pid(self) -> int:
        assert self.process is not None and self.process.server is not None
        return self.process.server.process.pid

    def reconciles(self) -> int:
        assert self.process is not None
        return self.process.reconciles()

    def logs(self) -> list[Path]:
        return self.all_logs

    def manifest(self, name: str, ranks: int) -> Json:
        return {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "TrainingJob",
            "metadata": {"name": name},
            "spec": {"workers": {"replicas": ranks}, "trainer": {"steps": 100}},
        }

    def says_running(self, job: Json) -> bool:
        return bool((job.get("status") or {}).get("phase") == "Running")

    def failing_pod(self, job: str) -> str:
        return f"{job}-worker-1-1"

    def gang_back(self, book: PodBook, failed_uid: str, ranks: int) -> bool:
        return book.running_by_attempt["2"] >= ranks  # the whole gang again, as attempt 2

    def describe(self) -> str:
        settings = " ".join(f"{k}={v}" for k, v in self.settings.items())
        return f"`python -m trainingjob` {trainingjob.__version__}, {settings}; logs at INFO (its default, text)"


class Kubeflow(Contender):
    user, group, version, plural = KUBEFLOW_USER, kubeflow.GROUP, kubeflow.VERSION, kubeflow.PLURAL

    def __init__(self, key: str, *, unthrottled: bool, threads: int, folder: Path) -> None:
        self.key, self.threads, self.folder = key, threads, folder
        self.qps: float | None = kubeflow.UNTHROTTLED_QPS if unthrottled else None
        self.burst: int | None = kubeflow.UNTHROTTLED_BURST if unthrottled else None
        self.operator: kubeflow.KubeflowOperator | None = None
        self.all_logs: list[Path] = []

    def start(self, plane: ControlPlane, log_dir: Path, *, idle: bool = False) -> None:
        kubeconfig = plane.user_kubeconfig(self.user, ("system:masters",))
        self.operator = kubeflow.KubeflowOperator(
            kubeconfig,
            log_dir,
            qps=self.qps,
            burst=self.burst,
            threads=self.threads,
            log_level="info",
            folder=self.folder,
        )
        self.operator.start()
        assert self.operator.server is not None
        self.all_logs.append(self.operator.server.log_path)

    def stop(self) -> None:
        if self.operator is not None:
            self.operator.stop()
            self.operator = None

    def pid(self) -> int:
        assert self.operator is not None and self.operator.server is not None
        return self.operator.server.process.pid

    def reconciles(self) -> int:
        """controller-runtime's reconcile count of the PyTorchJob controller (its /metrics)."""
        assert self.operator is not None
        url = f"http://127.0.0.1:{self.operator.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
        prefix = 'controller_runtime_reconcile_total{controller="pytorchjob-controller"'
        return int(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix)))

    def logs(self) -> list[Path]:
        return self.all_logs

    def manifest(self, name: str, ranks: int) -> Json:
        return kubeflow.pytorchjob(name, ranks, IMAGE)

    def says_running(self, job: Json) -> bool:
        conditions = (job.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Running" and c.get("status") == "True" for c in conditions)

    def failing_pod(self, job: str) -> str:
        return f"{job}-worker-0"  # Master is rank 0, Worker 0 is rank 1

    def gang_back(self, book: PodBook, failed_uid: str, ranks: int) -> bool:
        return len(book.running) >= ranks and failed_uid not in book.running  # its replacement runs

    def describe(self) -> str:
        limit = (
            f"--kube-api-qps={round(self.qps)} --kube-api-burst={self.burst}"
            if self.qps is not None
            else "client rate limit left at its defaults (qps 20, burst 30)"
        )
        return (
            f"training-operator {kubeflow_version(self.folder)} --enable-scheme=pytorchjob --leader-elect=false "
            f"--controller-threads={self.threads} --zap-log-level=info, {limit}"
        )


# --- measuring ------------------------------------------------------------------------------------------------------


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
        core.delete_namespace(namespace)

        def gone() -> bool:
            try:
                core.read_namespace(namespace)
            except client.ApiException as error:
                if error.status == 404:
                    return True
                raise
            return False

        poll_until(gone, timeout=self.deadline, interval=0.2, what=f"namespace {namespace} deleted")

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
        cpu_before = kubeflow.process_usage(side.pid()).cpu_seconds
        offset, wall = run.audit.offset(), datetime.datetime.now(datetime.UTC)
        began = time.monotonic()
        act()
        pods_at = pod_book.wait(done, run.deadline, f"{total} pods Running ({scenario.title})")
        statuses = job_book.expect(lambda b: len(b.running) >= len(names))
        job_book.wait(statuses, run.deadline, f"{len(names)} job statuses Running")
        usage = kubeflow.process_usage(side.pid())
        counts = run.audit.requests(offset, wall).get(side.user, Counter())
        lags, unchanged, gangs = [], 0, pod_book.gangs_complete_at()
        for name in names:
            status_at = job_book.running_since(name, began)
            gang_at = gangs.get(name)
            if status_at is None:
                unchanged += 1
            elif gang_at is not None:
                lags.append(status_at - gang_at)
        changed = [t for t in (job_book.running_since(n, began) for n in names) if t is not None]
    return Measurement(
        seconds=pods_at - began,
        status_seconds=max(changed) - began if changed else None,
        cpu_seconds=usage.cpu_seconds - cpu_before,
        peak_rss_mib=usage.peak_rss_bytes / 2**20,
        requests=counts,
        lags=lags,
        unchanged=unchanged,
    )


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


def side_run(
    contender: Contender, results: Results, args: argparse.Namespace, binaries: Binaries, keep: Path | None
) -> None:
    """A fresh cluster tier for one side: every scenario, then the idle window; logs kept under `keep`."""
    contender.all_logs = []
    with tempfile.TemporaryDirectory(prefix="tj-bench-kf-") as folder:
        root = Path(folder)
        plane = AuditedControlPlane(root, binaries, scheduler_qps=args.scheduler_qps)
        plane.start()
        run: Run | None = None
        try:
            admin = api_client(plane.kubeconfig)
            install_trainingjob_crd(admin)
            kubeflow.install_crd(admin, args.kubeflow_folder)
            add_nodes(client.CoreV1Api(admin), results.nodes)
            audit = AuditLog(plane.audit_log, admin, plane.user_kubeconfig(MARKER_USER, ("system:masters",)))
            run = Run(contender, plane, admin, audit, args.deadline)
            measure_side(run, results, args, root)
            results.peak_reset = results.peak_reset and run.peak_reset
        except BaseException:
            for log in contender.logs():
                print(f"--- {log.name} ends:\n{tail(log)}", file=sys.stderr)
            raise
        finally:
            contender.stop()
            if run is not None:
                run.close()
            plane.stop()
            if keep is not None:
                target = keep / f"{len(results.orders)}-{contender.key}"
                target.mkdir(parents=True, exist_ok=True)
                copies = [(log, f"{log.parent.name}-{log.name}") for log in contender.logs()]
                for path, name in [*copies, (plane.audit_log, "audit.log")]:
                    with contextlib.suppress(OSError):
                        shutil.copy(path, target / name)


def measure_side(run: Run, results: Results, args: argparse.Namespace, root: Path) -> None:
    contender = run.contender
    contender.start(run.plane, root)
    results.describe[contender.key] = contender.describe()
    warm_up(run)
    for scenario in results.scenarios:
        measurement = measure(run, scenario)
        results.measurements.setdefault((scenario.key, contender.key), []).append(measurement)
        print(f"  {contender.key:22} {scenario.title}: {summary(measurement)}", flush=True)
    if args.idle_jobs:
        if contender.restart_for_idle:
            contender.stop()
            contender.start(run.plane, root, idle=True)
            warm_up(run)
        idle = measure_idle(run, args.idle_jobs, args.idle_ranks, args.idle_window)
        results.idle.setdefault(contender.key, []).append(idle)
        print(f"  {contender.key:22} idle: {idle.reads} reads, {idle.reconciles} reconciles", flush=True)
    contender.stop()


def summary(m: Measurement) -> str:
    lag50, lag99 = m.lag(0.5), m.lag(0.99)
    lags = f"lag p50 {fmt(lag50, 3)} p99 {fmt(lag99, 3)} s" + (f" ({m.unchanged} unchanged)" if m.unchanged else "")
    top = ", ".join(f"{n} {k}" for k, n in m.requests.most_common(4))
    return (
        f"{m.seconds:.2f} s pods, {fmt(m.status_seconds)} s statuses, CPU {m.cpu_seconds:.2f} s, "
        f"RSS {m.peak_rss_mib:.0f} MiB, {m.reads} reads, {m.writes} writes, {lags}; {top}"
    )


def tail(path: Path, lines: int = 30) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


# --- the report -----------------------------------------------------------------------------------------------------


def fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def ratio(ours: float | None, theirs: float | None) -> str:
    if ours is None or theirs is None or ours <= 0 or theirs <= 0:
        return "n/a"
    return f"{ours / theirs:.2f}"


Metric = tuple[str, Callable[[Measurement], float | None], int]
METRICS: tuple[Metric, ...] = (
    ("time to all pods Running (s)", lambda m: m.seconds, 2),
    ("time to the last status turning Running (s)", lambda m: m.status_seconds, 2),
    ("operator CPU (s)", lambda m: m.cpu_seconds, 2),
    ("operator peak RSS (MiB)", lambda m: m.peak_rss_mib, 0),
    ("apiserver reads (get/list/watch)", lambda m: m.reads, 0),
    ("apiserver writes (create/update/patch/delete)", lambda m: m.writes, 0),
    ("status lag p50 (s)", lambda m: m.lag(0.5), 3),
    ("status lag p99 (s)", lambda m: m.lag(0.99), 3),
)


def scenario_table(results: Results, scenario: Scenario) -> list[str]:
    sides = results.sides
    header = ["metric (median)", *sides]
    header += [f"ours / {s}" for s in sides if s != OURS] if OURS in sides else []
    rows = [header, ["---"] + ["---:"] * (len(header) - 1)]
    for label, value, digits in METRICS:
        medians = {s: median([value(m) for m in results.measurements.get((scenario.key, s), [])]) for s in sides}
        row = [label, *(fmt(medians[s], digits) for s in sides)]
        if OURS in sides:
            row += [ratio(medians[OURS], medians[s]) for s in sides if s != OURS]
        rows.append(row)
    return ["| " + " | ".join(row) + " |" for row in rows]


def top_requests(results: Results, scenario: Scenario, count: int = 6) -> list[str]:
    lines = []
    for side in results.sides:
        runs = results.measurements.get((scenario.key, side), [])
        keys = {k for m in runs for k in m.requests}
        medians = {k: statistics.median([m.requests.get(k, 0) for m in runs]) for k in keys}
        top = sorted(medians.items(), key=lambda item: -item[1])[:count]
        lines.append(f"- {side}: " + ", ".join(f"{n:,.0f} {k}" for k, n in top))
    return lines


def runs_line(results: Results, scenario: Scenario) -> str:
    parts = []
    for side in results.sides:
        values = [m.seconds for m in results.measurements.get((scenario.key, side), [])]
        parts.append(f"{side} " + ", ".join(f"{v:.2f}" for v in values))
    return "time to all pods Running, each run (s): " + "; ".join(parts)


def idle_lines(results: Results, args: argparse.Namespace) -> list[str]:
    if not results.idle:
        return []
    lines = [
        f"apiserver reads (get/list, not watch) per reconcile of an unchanged job: {args.idle_jobs} jobs x "
        f"{args.idle_ranks} ranks Running, a {args.idle_window:.0f} s window (median over the runs; goal: 0)",
        "",
    ]
    for side in results.sides:
        runs = results.idle.get(side, [])
        if not runs:
            continue
        reads_median = statistics.median([i.reads for i in runs])
        reconciles = statistics.median([i.reconciles for i in runs])
        per = f"{reads_median / reconciles:.3f} reads per reconcile" if reconciles else "no reconciles"
        setting = " (TJ_OPERATOR_RESYNC_SECONDS=1)" if side == OURS else " (no periodic resync)"
        keys = Counter[str]()
        for idle in runs:
            keys.update({k: n for k, n in idle.requests.items() if k.split(" ")[0] in ("get", "list")})
        what = ", ".join(f"{n / len(runs):,.1f} {k}" for k, n in keys.most_common(4)) or "none"
        lines.append(f"- {side}{setting}: {reads_median:,.0f} reads, {reconciles:,.0f} reconciles: {per} ({what})")
    return lines


def report(results: Results, args: argparse.Namespace) -> list[str]:
    lines: list[str] = []
    for scenario in results.scenarios:
        lines += [f"### {scenario.title}", "", *scenario_table(results, scenario), ""]
        lines += ["Requests that dominate (median count, 'verb resource'):", "", *top_requests(results, scenario)]
        lines += ["", runs_line(results, scenario), ""]
        unchanged = {s: [m.unchanged for m in results.measurements.get((scenario.key, s), [])] for s in results.sides}
        if any(sum(counts) for counts in unchanged.values()):
            said = "; ".join(f"{s} {', '.join(map(str, n))}" for s, n in unchanged.items() if sum(n))
            lines += [f"Jobs whose status said Running throughout, so no lag was measured (each run): {said}", ""]
    lines += idle_lines(results, args)
    return lines


def machine() -> list[str]:
    meminfo = Path("/proc/meminfo").read_text().splitlines()
    memory = next((int(line.split()[1]) for line in meminfo if line.startswith("MemTotal:")), 0)
    models = [
        line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines() if "model name" in line
    ]
    return [
        f"- nproc: {len(os.sched_getaffinity(0))}",
        f"- memory: {memory / 2**20:.1f} GiB",
        f"- CPU: {models[0] if models else platform.processor() or 'unknown'}",
        f"- kernel: {platform.system()} {platform.release()}",
        f"- Python {platform.python_version()}, kopf {importlib.metadata.version('kopf')}",
    ]


def kubeflow_version(folder: Path) -> str:
    return folder.name.split("_")[0].removeprefix("kubeflow-")


def our_revision() -> str:
    def git(*argv: str) -> str:
        done = subprocess.run(
            ["git", "--no-optional-locks", *argv], check=False, cwd=REPO, capture_output=True, text=True
        )
        return done.stdout.strip()

    changed = git("status", "--porcelain", "--", "operator")
    return git("rev-parse", "--short", "HEAD") + (" with uncommitted changes in operator/" if changed else "")


def method(results: Results, args: argparse.Namespace) -> list[str]:
    scenarios = {s.key: s for s in results.scenarios}
    failure = next((s for s in results.scenarios if s.failure), None)
    plane = Path(os.environ.get("TJ_CONTROLPLANE_BIN", "?")).name
    lines = [
        f"- Cluster tier ({plane}): etcd, kube-apiserver (priority and fairness off, as in the tests), "
        f"kube-scheduler (client limit raised to --kube-api-qps={args.scheduler_qps} so that binding pods is not "
        "what both sides wait for), kube-controller-manager, kwok; "
        f"{results.nodes} kwok nodes of {PODS_PER_NODE} pods plus the tier's two of 110.",
        "- One fresh cluster tier per side and repetition; one operator runs at a time. The order of the sides "
        "rotates every repetition: " + "; ".join(", ".join(order) for order in results.orders) + ".",
        "- Every scenario runs in a fresh namespace after a warm-up job (1 x 2 ranks, not measured); the namespace "
        "is deleted and waited out (pods gone) before the next scenario.",
        "- Each operator runs out of cluster as a process on this machine, with a client certificate of its own "
        f"(user `{OURS_USER}` or `{KUBEFLOW_USER}`, group system:masters).",
        "- Time: from the first create request (or the failure) until a pod watch sees the last pod Running; "
        "jobs are created from a thread pool of 16. Job statuses: a watch on the jobs; ours says Running with "
        "`status.phase: Running`, Kubeflow's with a condition Running=True.",
        "- Status lag, per job: the watch's arrival time of the status turning Running minus the arrival time of "
        "the job's last running pod turning Running (signed; p50 and p99 over the jobs of a run). Kubeflow sets "
        "Running once its Master pod runs (not all workers), so its lag can be negative; it is positive when its "
        "work queue or client rate limit delays the status write.",
        "- CPU: user+system seconds of the operator process over the window (/proc/PID/stat); peak RSS: VmHWM "
        + ("reset at the start of each scenario (clear_refs 5)." if results.peak_reset else "since its start."),
        "- Requests: the apiserver's audit log (policy: level Metadata for the two operators' users, stage "
        "RequestReceived omitted), each request counted once by auditID, received inside the window (the action "
        "until every pod and every status is Running). Reads: get, list, watch; writes: create, update, patch, "
        "delete, deletecollection (Events included).",
    ]
    if failure is not None:
        lines.append(
            f"- Failure ({failure.ranks} ranks): once every rank and the status are Running, rank 1's pod is marked "
            "Failed with exit code 1 through the pods/status subresource (as a kubelet would); the clock stops when "
            "every rank is Running again. The semantics differ: ours restarts the whole gang as a new attempt (its "
            "backoff base set to 0.1 s, default 10 s), Kubeflow (restartPolicy OnFailure) deletes and recreates "
            "the failed pod only."
        )
    if "many" in scenarios:
        lines.append(
            "- The jobs of both sides have the same number of pods; Kubeflow's pods request 100m CPU and 128Mi, "
            "ours none; Kubeflow also creates one headless Service per pod, ours one per job (and a NetworkPolicy)."
        )
    return lines


def write_doc(results: Results, args: argparse.Namespace, argv: list[str]) -> None:
    shown = [a for i, a in enumerate(argv) if not (a.startswith("--keep-logs") or argv[i - 1 : i] == ["--keep-logs"])]
    command = shlex.join(["python", "bench/bench_kubeflow.py", *shown])
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    text = [
        "<!-- Generated by bench/bench_kubeflow.py --write-doc (make bench-kubeflow): do not edit by hand. -->",
        "# Performance: our operator against Kubeflow's training-operator",
        "",
        f"Generated by the benchmark on {when} with `{command}` (`make bench-kubeflow` runs it at full size and "
        f"regenerates this page). {args.repetitions} repetition(s); every figure is a median over them.",
        "",
        "## Results",
        "",
        *report(results, args),
        "",
        "## Settings",
        "",
        *(f"- {side}: {results.describe.get(side, '?')}" for side in results.sides),
        f"- Our operator at revision {our_revision()}. Kubeflow is built from the Go module proxy by "
        "scripts/build-kubeflow.sh and runs out of cluster as bench/kubeflow.py describes (PyTorchJob scheme only, "
        "no webhook in front of it, no gang scheduler).",
        "- Equal concurrency: ours reconciles 8 jobs at a time (TJ_OPERATOR_WORKERS), Kubeflow runs 8 controller "
        "threads. Log levels: ours INFO (its default); Kubeflow info (--zap-log-level=info; its per-reconcile "
        "logrus lines print at info either way).",
        "",
        "## Method",
        "",
        *method(results, args),
        "",
        "## Machine",
        "",
        *machine(),
        "",
    ]
    DOC.write_text("\n".join(text))
    print(f"wrote {DOC.relative_to(REPO)}")


# --- main -----------------------------------------------------------------------------------------------------------


def scenarios_from(args: argparse.Namespace) -> list[Scenario]:
    def scaled(value: int | None, default: int, floor: int) -> int:
        return value if value is not None else max(floor, round(default * args.scale))

    big = scaled(args.big_ranks, 1024, 2)
    jobs, job_ranks = scaled(args.jobs, 1000, 1), args.job_ranks or 8
    failure = scaled(args.failure_ranks, 256, 2)
    return [
        Scenario("big", f"1 job x {big:,} ranks: create -> all pods Running", 1, big),
        Scenario(
            "many",
            f"{jobs:,} jobs x {job_ranks} ranks: create -> all {jobs * job_ranks:,} pods Running",
            jobs,
            job_ranks,
        ),
        Scenario("failure", f"rank failure in a {failure}-rank job -> all ranks Running again", 1, failure, True),
    ]


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the default sizes (1024, 1000 jobs, 256)")
    parser.add_argument("--big-ranks", type=int, help="ranks of scenario 1's one job (default 1024)")
    parser.add_argument("--jobs", type=int, help="jobs of scenario 2 (default 1000)")
    parser.add_argument("--job-ranks", type=int, help="ranks of each job of scenario 2 (default 8)")
    parser.add_argument("--failure-ranks", type=int, help="ranks of scenario 3's job (default 256)")
    parser.add_argument("--idle-jobs", type=int, default=20, help="jobs of the reads-per-reconcile window; 0: skip")
    parser.add_argument("--idle-ranks", type=int, default=2)
    parser.add_argument("--idle-window", type=float, default=20.0)
    parser.add_argument("--threads", type=int, default=8, help="our TJ_OPERATOR_WORKERS and Kubeflow's threads")
    parser.add_argument("--sides", default=",".join(SIDES), help=f"a subset of {','.join(SIDES)}")
    parser.add_argument("--scheduler-qps", type=int, default=1000, help="kube-scheduler's --kube-api-qps (0: its own)")
    parser.add_argument("--deadline", type=float, default=1800.0, help="seconds any one wait may take")
    parser.add_argument("--keep-logs", type=Path, help="copy the operators' logs and the audit logs here")
    parser.add_argument("--write-doc", action="store_true", help=f"regenerate {DOC.relative_to(REPO)}")
    args = parser.parse_args(argv)
    unknown = set(args.sides.split(",")) - set(SIDES)
    if unknown:
        parser.error(f"unknown sides: {', '.join(sorted(unknown))}")
    return args


def main() -> None:
    # SIGTERM (a timeout, a Ctrl-C'd make) unwinds like an exception, so every process started is stopped.
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    argv = sys.argv[1:]
    args = parse(argv)
    args.kubeflow_folder = kubeflow.build()
    binaries = Binaries.from_environment()
    sides = [s for s in SIDES if s in args.sides.split(",")]
    results = Results(scenarios_from(args), sides)
    most = max(s.jobs * s.ranks for s in results.scenarios)
    results.nodes = max(2, math.ceil(most * 1.15 / PODS_PER_NODE))
    contenders: dict[str, Contender] = {
        OURS: Ours(args.threads),
        KF_UNTHROTTLED: Kubeflow(KF_UNTHROTTLED, unthrottled=True, threads=args.threads, folder=args.kubeflow_folder),
        KF_DEFAULT: Kubeflow(KF_DEFAULT, unthrottled=False, threads=args.threads, folder=args.kubeflow_folder),
    }
    for repetition in range(args.repetitions):
        order = sides[repetition % len(sides) :] + sides[: repetition % len(sides)]
        results.orders.append(order)
        print(f"repetition {repetition + 1}/{args.repetitions}: {', '.join(order)}", flush=True)
        for side in order:
            side_run(contenders[side], results, args, binaries, args.keep_logs)
    print("\n".join(["", *report(results, args)]))
    if args.write_doc:
        write_doc(results, args, argv)


if __name__ == "__main__":
    main()
