"""trainingjob_queue_depth counts jobs waiting for a reconcile: it goes back to 0 once their wake-ups are taken up
(it used to be updated only by wake(), so it sat at 1 for ever after the last event), and counts the jobs that
wait for a free worker or for the Lease."""

import asyncio
from collections.abc import Callable

import pytest

from trainingjob.runtime.metrics import Metrics
from trainingjob.runtime.queue import Key, ReconcileQueue

pytestmark = pytest.mark.fast

DEADLINE = 10.0


async def until(what: Callable[[], bool]) -> None:
    """Yield to the loop until `what` holds, failing after DEADLINE seconds."""
    loop = asyncio.get_running_loop()
    end = loop.time() + DEADLINE
    while not what():
        assert loop.time() < end, "timed out"
        await asyncio.sleep(0)


def depth(metrics: Metrics) -> float | None:
    return metrics.registry.get_sample_value("trainingjob_queue_depth")


def test_the_depth_is_zero_once_every_wakeup_was_taken_up() -> None:
    async def scenario() -> None:
        metrics = Metrics()
        done: list[Key] = []

        async def reconcile(key: Key) -> float | None:
            done.append(key)
            return 60.0  # the job stays: the next reconcile is a resync a minute away

        queue = ReconcileQueue(reconcile, workers=2, resync_seconds=60, on_depth=metrics.queue_depth.set)
        queue.wake(("ns", "a"))
        queue.wake(("ns", "b"))
        assert depth(metrics) == 2
        await until(lambda: len(done) == 2)
        assert depth(metrics) == 0  # idle, before any stop
        await queue.stop()

    asyncio.run(scenario())


def test_jobs_waiting_for_a_worker_or_the_lease_are_counted() -> None:
    async def scenario() -> None:
        metrics = Metrics()
        release, started = asyncio.Event(), asyncio.Event()
        done: list[Key] = []

        async def reconcile(key: Key) -> float | None:
            started.set()
            await release.wait()
            done.append(key)
            return None  # the job is gone: its loop ends

        gate = asyncio.Event()
        queue = ReconcileQueue(reconcile, workers=1, resync_seconds=60, on_depth=metrics.queue_depth.set, gate=gate)
        for name in ("a", "b", "c"):
            queue.wake(("ns", name))
        assert depth(metrics) == 3  # the gate is closed: nothing taken up
        gate.set()
        await started.wait()
        assert depth(metrics) == 2  # one runs, two wait for the one worker
        release.set()
        await until(lambda: len(done) == 3)
        assert depth(metrics) == 0
        await queue.stop()

    asyncio.run(scenario())
