"""Many job lifecycles while the operator is SIGKILLed at random moments and started again: DDP and
parameter-server jobs, retryable, permanent and OOM exits, evictions through the API and by the kubelet. Every
job must end in its expected phase with exact restart counts, no replica may ever have two pods at once (a
pod watch checks every event), and no pod may be left behind."""

import math
import os
import random
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes import client, watch
from testbed import pods as kubelet
from testbed.controlplane import ControlPlane
from testbed.crds import install_crd
from testbed.harness import Harness, condition
from testbed.operator import OperatorProcess, operator_running
from testbed.processes import poll_until
from tests.support.builders import job_manifest

pytestmark = pytest.mark.cluster
ROUNDS = int(os.environ.get("TJ_CHAOS_ROUNDS", "12"))
SEED = 20261122
SPACING = 0.5
# Seconds without any lifecycle moving (a job submitted, a step taken, a phase changed) before the run counts as
# stuck. Not a deadline for the whole run: that one took 140 s alone on 2 quiet cores and 325 s in CI beside the
# cluster tests, so any total would fail a slower machine's healthy run.
STALL = float(os.environ.get("TJ_CHAOS_STALL", "180"))
# What happens to the pods of an attempt (by replica, "worker-1"); returns the replicas it acted on.
Action = Callable[[Harness, dict[str, Any]], list[str]]


def fail(replica: str, code: int, reason: str = "") -> Action:
    def act(h: Harness, pods: dict[str, Any]) -> list[str]:
        h.finish(pods[replica].metadata.name, code, reason=reason)
        return [replica]

    return act


def evict(replica: str) -> Action:
    def act(h: Harness, pods: dict[str, Any]) -> list[str]:
        kubelet.evict_pod(h.core, h.ns, pods[replica].metadata.name)
        return [replica]

    return act


def kubelet_evict(replica: str) -> Action:
    def act(h: Harness, pods: dict[str, Any]) -> list[str]:
        kubelet.evict_pod_by_kubelet(h.core, h.ns, pods[replica].metadata.name)
        return [replica]

    return act


def together(*actions: Action) -> Action:
    return lambda h, pods: [replica for action in actions for replica in action(h, pods)]


def succeed(h: Harness, pods: dict[str, Any]) -> list[str]:
    workers = [replica for replica in pods if replica.startswith("worker-")]
    for replica in workers:
        h.finish(pods[replica].metadata.name, 0)
    return workers


@dataclass(frozen=True)
class Scenario:
    name: str
    spec: dict[str, Any]
    steps: tuple[tuple[int, Action], ...]  # (the attempt whose pods must all run, what happens to them)
    phase: str
    attempt: int
    restarts: dict[str, int]
    reason: str = ""


PS = {"mode": "ParameterServer", "parameterServers": {"replicas": 1}}
SCENARIOS = (
    Scenario("ddp-retry", {}, ((1, fail("worker-1", 75)), (2, succeed)), "Succeeded", 2, {"retryable": 1}),
    Scenario(
        "ddp-oom", {"workers": 3}, ((1, fail("worker-0", 137, "OOMKilled")), (2, succeed)), "Succeeded", 2, {"oom": 1}
    ),
    Scenario("ddp-permanent", {}, ((1, fail("worker-0", 78)),), "Failed", 1, {}, "PermanentFailure"),
    Scenario("ddp-evicted", {}, ((1, evict("worker-1")), (2, succeed)), "Succeeded", 2, {"disruption": 1}),
    Scenario("ddp-pressure", {}, ((1, kubelet_evict("worker-0")), (2, succeed)), "Succeeded", 2, {"disruption": 1}),
    Scenario("ps-worker", PS, ((1, fail("worker-1", 75)), (1, succeed)), "Succeeded", 1, {"retryable": 1}),
    Scenario(
        "ps-two-workers",
        {**PS, "workers": 3},
        ((1, together(fail("worker-0", 75), fail("worker-2", 1))), (1, succeed)),
        "Succeeded",
        1,
        {"retryable": 2},
    ),
    Scenario("ps-server", PS, ((1, fail("ps-0", 75)), (2, succeed)), "Succeeded", 2, {"retryable": 1}),
    Scenario(
        "budget",
        {"runPolicy": {"backoffLimit": 1, "cleanPodPolicy": "All"}},
        ((1, fail("worker-0", 1)), (2, fail("worker-1", 1))),
        "Failed",
        2,
        {"retryable": 1},
        "BackoffLimitExceeded",
    ),
)


@dataclass
class Lifecycle:
    """One job walking through its scenario: each step once, when every pod of its attempt runs and none of them
    is a pod an earlier step acted on (a replaced worker must be the replacement)."""

    name: str
    scenario: Scenario
    step: int = 0
    touched: set[str] = field(default_factory=set)

    def manifest(self) -> dict[str, Any]:
        spec = {"runPolicy": {"cleanPodPolicy": "All"}, **self.scenario.spec}
        workers = spec.pop("workers", 2)
        return job_manifest(self.name, workers=workers, **spec)

    def advance(self, h: Harness) -> None:
        if self.step >= len(self.scenario.steps):
            return
        attempt, action = self.scenario.steps[self.step]
        expected = self.manifest()["spec"]["workers"]["replicas"] + int("parameterServers" in self.scenario.spec)
        pods = {
            f"{p.metadata.labels['trainingjob.io/role']}-{p.metadata.labels['trainingjob.io/replica-index']}": p
            for p in h.pods(self.name)
            if p.metadata.labels["trainingjob.io/attempt"] == str(attempt)
        }
        if len(pods) != expected or any(
            p.status.phase != "Running" or p.metadata.uid in self.touched for p in pods.values()
        ):
            return
        self.touched |= {pods[replica].metadata.uid for replica in action(h, pods)}
        self.step += 1


class SlotWatch:
    """Every pod ADDED and DELETED in the namespace, from a watch: a replica with two pods at once is recorded."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.core, self.namespace = client.CoreV1Api(api), namespace
        self.live: dict[tuple[str, ...], set[str]] = {}
        self.doubled: list[str] = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped.is_set():
            listed = self.core.list_namespaced_pod(self.namespace)  # the truth after every reconnect
            self.live = {}
            for pod in listed.items:
                self._seen("ADDED", pod)
            stream = watch.Watch().stream(
                self.core.list_namespaced_pod,
                self.namespace,
                resource_version=listed.metadata.resource_version,
                timeout_seconds=5,
            )
            for event in stream:
                self._seen(event["type"], event["object"])

    def _seen(self, kind: str, pod: Any) -> None:
        labels = pod.metadata.labels or {}
        slot = tuple(labels.get(f"trainingjob.io/{key}", "") for key in ("job-name", "role", "replica-index"))
        pods = self.live.setdefault(slot, set())
        (pods.discard if kind == "DELETED" else pods.add)(pod.metadata.uid)
        if len(pods) > 1:
            self.doubled.append(f"{slot}: {sorted(pods)}")

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=10)


class Killer:
    """Lets each operator process lead, then SIGKILLs it a random moment later (0.5-3 s: before, during or after
    any write of any reconcile) and starts the next one, until stopped."""

    def __init__(self, operator: OperatorProcess, rng: random.Random) -> None:
        self.operator, self.rng, self.kills = operator, rng, 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _leading(self) -> bool:
        return self.stopped.is_set() or "leading as" in self.operator.log()

    def _run(self) -> None:
        while not self.stopped.is_set():
            poll_until(self._leading, timeout=60, interval=0.05, what="the operator to lead")
            if self.stopped.wait(self.rng.uniform(0.5, 3.0)):
                return
            self.operator.kill()
            self.kills += 1
            self.operator.start()

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=30)


@pytest.fixture(scope="module")
def operator(cluster: ControlPlane) -> Iterator[OperatorProcess]:
    with cluster.api_client() as api:
        install_crd(api)
    with operator_running(
        cluster.kubeconfig,
        TJ_OPERATOR_BACKOFF_BASE_SECONDS="0.2",
        TJ_OPERATOR_BACKOFF_MAX_SECONDS="1",
        TJ_OPERATOR_RESYNC_SECONDS="2",
        TJ_OPERATOR_LEASE_DURATION_SECONDS="1",
        TJ_OPERATOR_LEASE_RENEW_SECONDS="0.25",
    ) as process:
        yield process


class Run:
    """Submits the jobs one every SPACING seconds, so lifecycles overlap with every kill, and moves each along."""

    def __init__(self, h: Harness, lifecycles: list[Lifecycle]) -> None:
        self.h, self.waiting, self.started, self.next_at = h, list(lifecycles), list[Lifecycle](), 0.0
        self.seen: tuple[Any, ...] = ()  # where every started lifecycle stood at the last step
        self.moved_at = time.monotonic()

    def step(self) -> bool:
        if self.waiting and time.monotonic() >= self.next_at:
            lifecycle = self.waiting.pop(0)
            self.h.create(lifecycle.manifest())
            self.started.append(lifecycle)
            self.next_at = time.monotonic() + SPACING
        for lifecycle in self.started:
            lifecycle.advance(self.h)
        phases = [(self.h.job(lc.name).get("status") or {}).get("phase") for lc in self.started]
        now = (*((lc.name, lc.step) for lc in self.started), *phases)
        if now != self.seen:
            self.seen, self.moved_at = now, time.monotonic()
        return not self.waiting and all(phase in ("Succeeded", "Failed") for phase in phases)

    def outcome(self) -> str | None:
        """Once every lifecycle has ended "ended", once none moved for STALL seconds "stuck", else None."""
        if time.monotonic() - self.moved_at > STALL:
            return "stuck"
        return "ended" if self.step() else None


def _where(h: Harness, lifecycles: list[Lifecycle]) -> str:
    """Where each unfinished lifecycle stands: its step, its status and its pods."""
    lines = []
    for lc in lifecycles:
        status = h.job(lc.name).get("status") or {}
        if status.get("phase") not in ("Succeeded", "Failed"):
            pods = [
                (p.metadata.name, p.status.phase, p.metadata.deletion_timestamp is not None) for p in h.pods(lc.name)
            ]
            conditions = [
                (c["type"], c["status"], c["reason"], c["message"][:120]) for c in status.get("conditions", [])
            ]
            lines.append(
                f"{lc.name} step {lc.step}: {status.get('phase')} attempt {status.get('attempt')} {pods} {conditions}"
            )
    return "\n".join(lines)


@pytest.mark.timeout(3600)  # a hang's last resort: the run itself fails once it stops moving (STALL)
def test_random_operator_kills_across_many_lifecycles(h: Harness, operator: OperatorProcess) -> None:
    rng = random.Random(SEED)
    lifecycles = [Lifecycle(f"{s.name}-{r}", s) for r in range(ROUNDS) for s in SCENARIOS]
    rng.shuffle(lifecycles)
    slots = SlotWatch(h.core.api_client, h.ns)
    killer = Killer(operator, rng)
    started = time.monotonic()
    try:
        run = Run(h, lifecycles)
        if poll_until(run.outcome, timeout=math.inf, interval=0.2, what="every lifecycle to end") == "stuck":
            _keep_logs(operator)
            where = _where(h, run.started)  # the lifecycles submitted so far
            raise AssertionError(f"no lifecycle moved for {STALL:.0f} s:\n{where}\n{operator.log_tail()}")
    finally:
        killer.stop()
        if operator.server is None:
            operator.start()
    took = time.monotonic() - started
    wrong = []
    for lifecycle in lifecycles:
        status, expected = h.job(lifecycle.name)["status"], lifecycle.scenario
        restarts = {k: v for k, v in status["restarts"].items() if v}
        got = (status["phase"], status["attempt"], restarts)
        if got != (expected.phase, expected.attempt, expected.restarts) or lifecycle.step != len(expected.steps):
            wrong.append(  # the last failure says which counted failure was not expected
                f"{lifecycle.name}: {got}, expected {(expected.phase, expected.attempt, expected.restarts)}; "
                f"last failure: {status.get('lastFailure')}"
            )
        elif expected.reason:
            assert condition(h.job(lifecycle.name), "Failed")["reason"] == expected.reason
    poll_until(lambda: not any(h.pods(lc.name) for lc in lifecycles), timeout=120, what="every pod cleaned up")
    slots.stop()
    print(f"{len(lifecycles)} lifecycles, {killer.kills} operator kills, {took:.0f} s")
    _keep_logs(operator)
    assert not wrong, "\n".join(wrong)
    assert not slots.doubled, "\n".join(slots.doubled[:10])


def _keep_logs(operator: OperatorProcess) -> None:
    """With TJ_CHAOS_KEEP_LOGS=DIR, every operator process's log is copied there (the run's own folder goes)."""
    target = os.environ.get("TJ_CHAOS_KEEP_LOGS")
    if target:
        shutil.copytree(operator.log_dir, target, dirs_exist_ok=True)
