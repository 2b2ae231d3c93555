"""Stepping down: the reconciles in flight (threads, which outlive their cancelled tasks) are waited for, bounded,
before the Lease is given up, and a reconcile that outlived its leadership writes nothing more (the fence)."""

import asyncio
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest
from tests.support.builders import job_manifest
from tests.support.fake_cluster import FakeCluster

from trainingjob.children.workload import Act, QueueState, WorkloadAction
from trainingjob.model import TrainingJob
from trainingjob.runtime.cached import CachedCluster, CachedSweepCluster, FencedQueues, NotLeading
from trainingjob.runtime.in_flight import InFlight, step_down
from trainingjob.runtime.memory import Stores

pytestmark = pytest.mark.fast
DEADLINE = 10.0


def _busy(in_flight: InFlight, name: str, release: threading.Event) -> threading.Thread:
    started = threading.Event()

    def work() -> None:
        with in_flight.running(name):
            started.set()
            release.wait(DEADLINE)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    assert started.wait(DEADLINE)
    return thread


def test_the_lease_is_released_only_once_the_reconciles_in_flight_have_ended(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> list[str]:
        in_flight, release, order = InFlight(), threading.Event(), []
        thread = _busy(in_flight, "job ns/a", release)

        async def give_up_the_lease() -> None:
            order.append("released" if not thread.is_alive() else "released while a reconcile ran")

        stepping = asyncio.create_task(step_down(lambda: order.append("closed"), in_flight, give_up_the_lease, 30))
        loop = asyncio.get_running_loop()
        end = loop.time() + DEADLINE
        while "waiting up to" not in caplog.text:  # it says what it waits for, then waits
            assert loop.time() < end, "step_down never said what it waits for"
            await asyncio.sleep(0.01)
        assert order == ["closed"] and not stepping.done()
        release.set()
        await asyncio.wait_for(stepping, DEADLINE)
        return order

    with caplog.at_level(logging.INFO, logger="trainingjob.runtime.in_flight"):
        assert asyncio.run(scenario()) == ["closed", "released"]
    assert "job ns/a" in caplog.text


def test_a_reconcile_that_does_not_end_holds_the_lease_only_until_the_deadline(
    caplog: pytest.LogCaptureFixture,
) -> None:
    in_flight, release = InFlight(), threading.Event()
    _busy(in_flight, "sweep ns/s", release)
    released: list[bool] = []

    async def give_up_the_lease() -> None:
        released.append(True)

    try:
        with caplog.at_level(logging.INFO, logger="trainingjob.runtime.in_flight"):
            asyncio.run(step_down(lambda: None, in_flight, give_up_the_lease, 0.05))
    finally:
        release.set()
    assert released == [True]
    assert "1 reconcile(s) still running after 0 s: sweep ns/s" in caplog.text
    assert in_flight.wait(DEADLINE) == []


def test_reconciles_run_at_once_on_threads_of_their_own_and_leave_the_loops_executor_to_the_lease() -> None:
    """The loop's default executor is smaller than the workers on a small machine, and the Lease's renewals run on
    it: reconciles there would run fewer at once than asked, and a renewal would wait for one to end."""

    async def scenario() -> tuple[list[str], str, list[int]]:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(max_workers=1))
        in_flight, release = InFlight(threads=3), threading.Event()

        def reconcile() -> int:
            release.wait(DEADLINE)
            return 1

        running = [asyncio.create_task(in_flight.run(f"job ns/{i}", reconcile)) for i in range(3)]
        end = loop.time() + DEADLINE
        while len(in_flight.names()) < 3:
            assert loop.time() < end, f"only {in_flight.names()} ran at once"
            await asyncio.sleep(0.01)
        renewed = await asyncio.wait_for(asyncio.to_thread(lambda: "renewed"), DEADLINE)
        names = in_flight.names()
        release.set()
        results = await asyncio.gather(*running)
        in_flight.close()
        return names, renewed, results

    names, renewed, results = asyncio.run(scenario())
    assert names == ["job ns/0", "job ns/1", "job ns/2"]
    assert renewed == "renewed" and results == [1, 1, 1]


@pytest.mark.parametrize("leading", [True, False], ids=["leading", "no-longer-leading"])
def test_writes_are_fenced_once_the_operator_no_longer_leads(leading: bool) -> None:
    fake = FakeCluster(clock=lambda: datetime(2026, 1, 1, tzinfo=UTC))
    job = fake.submit(job_manifest("a", namespace="ns"))
    fake.add_pod("ns", {"kind": "Pod", "metadata": {"name": "a-worker-0-1", "labels": {}}, "spec": {}})
    uid = fake.pods[("ns", "a-worker-0-1")]["metadata"]["uid"]
    cluster = CachedCluster(fake, Stores(), may_write=lambda: leading)
    sweeps = CachedSweepCluster(fake, Stores(), may_write=lambda: leading)  # type: ignore[arg-type]
    writes: list[Callable[[], object]] = [
        lambda: cluster.write_status("ns", "a", job["metadata"]["resourceVersion"], {"phase": "Running"}),
        lambda: cluster.delete_pods("ns", {"a-worker-0-1": uid}, force=True),
        lambda: cluster.delete_job("ns", "a", job["metadata"]["uid"]),
    ]
    if leading:
        for write in writes:
            write()
        assert not fake.pods and not fake.jobs
        return
    for write in writes:
        with pytest.raises(NotLeading):
            write()
    with pytest.raises(NotLeading):
        sweeps.delete_job("ns", "a", job["metadata"]["uid"])
    assert ("ns", "a-worker-0-1") in fake.pods and ("ns", "a") in fake.jobs


class _Workloads:
    """A Queues that records the Workload writes it was asked for."""

    def __init__(self) -> None:
        self.applied: list[WorkloadAction] = []

    def read(self, namespace: str, job: str, uid: str) -> QueueState:
        return QueueState(exists=True)

    def apply(self, job: TrainingJob, action: WorkloadAction, now: datetime) -> None:
        self.applied.append(action)


@pytest.mark.parametrize("leading", [True, False], ids=["leading", "no-longer-leading"])
def test_kueue_workload_writes_are_fenced_too(leading: bool) -> None:
    direct = _Workloads()
    queues = FencedQueues(direct, may_write=lambda: leading)
    job = TrainingJob.model_validate(job_manifest("a", namespace="ns"))
    assert queues.read("ns", "a", "uid").exists  # reads are not fenced
    action = WorkloadAction(Act.RELEASE)
    if leading:
        queues.apply(job, action, datetime(2026, 1, 1, tzinfo=UTC))
        assert direct.applied == [action]
        return
    with pytest.raises(NotLeading):
        queues.apply(job, action, datetime(2026, 1, 1, tzinfo=UTC))
    assert direct.applied == []
