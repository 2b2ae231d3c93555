"""The reconcile queue: one reconcile per job at a time, wake-ups merged, nothing while the gate (the Lease) is
closed, and failures retried with a backoff that stays short while the apiserver is unreachable."""

import asyncio
import itertools
from collections import Counter

import pytest

from trainingjob.runtime.queue import ERROR_RETRY, TRANSIENT_RETRY, Key, ReconcileQueue, retry_delay

pytestmark = pytest.mark.fast


@pytest.mark.parametrize(
    ("failures", "transient", "delay"),
    [
        (1, True, 0.1),
        (2, True, 0.2),
        (4, True, 0.8),
        (5, True, 1.0),
        (50, True, 1.0),
        (1, False, 0.5),
        (7, False, 30.0),
    ],
    ids=[
        "first-transient",
        "second-transient",
        "fourth-transient",
        "capped-transient",
        "long-outage",
        "first-error",
        "capped-error",
    ],
)
def test_retry_delays(failures: int, transient: bool, delay: float) -> None:
    assert retry_delay(failures, transient) == pytest.approx(delay)
    assert retry_delay(failures, transient) <= (TRANSIENT_RETRY if transient else ERROR_RETRY)[1]


def test_wakeups_are_merged_and_a_job_is_never_reconciled_twice_at_once() -> None:
    async def scenario() -> Counter[Key]:
        runs: Counter[Key] = Counter()
        busy: set[Key] = set()

        async def reconcile(key: Key) -> float | None:
            assert key not in busy, "two reconciles of one job at once"
            busy.add(key)
            runs[key] += 1
            await asyncio.sleep(0.05)
            busy.discard(key)
            return None if runs[key] >= 2 else 60.0

        queue = ReconcileQueue(reconcile, workers=4, resync_seconds=60)
        for _ in range(10):
            queue.wake(("ns", "a"))
        await asyncio.sleep(0.01)
        for _ in range(10):
            queue.wake(("ns", "a"))  # while it runs: merged into one more
        await asyncio.sleep(0.3)
        await queue.stop()
        return runs

    assert asyncio.run(scenario()) == Counter({("ns", "a"): 2})


def test_nothing_is_reconciled_while_the_gate_is_closed() -> None:
    async def scenario() -> list[Key]:
        done: list[Key] = []

        async def reconcile(key: Key) -> float | None:
            done.append(key)
            return None

        gate = asyncio.Event()
        queue = ReconcileQueue(reconcile, workers=2, resync_seconds=60, gate=gate)
        queue.wake(("ns", "a"))
        queue.wake(("ns", "b"))
        await asyncio.sleep(0.1)
        assert not done
        gate.set()
        await asyncio.sleep(0.1)
        await queue.stop()
        return done

    assert sorted(asyncio.run(scenario())) == [("ns", "a"), ("ns", "b")]


def test_an_unreachable_apiserver_is_retried_within_a_second() -> None:
    async def scenario() -> list[float]:
        loop = asyncio.get_running_loop()
        attempts: list[float] = []

        async def reconcile(key: Key) -> float | None:
            attempts.append(loop.time())
            if len(attempts) < 6:
                raise ConnectionRefusedError("apiserver down")
            return None

        queue = ReconcileQueue(reconcile, workers=1, resync_seconds=60, is_transient=lambda e: isinstance(e, OSError))
        queue.wake(("ns", "a"))
        for _ in range(100):
            if len(attempts) >= 6:
                break
            await asyncio.sleep(0.1)
        await queue.stop()
        return [b - a for a, b in itertools.pairwise(attempts)]

    gaps = asyncio.run(scenario())
    assert len(gaps) == 5 and all(gap < 1.2 for gap in gaps) and gaps[-1] > gaps[0]


def test_a_wakeup_during_the_reconcile_that_found_the_job_gone_is_not_lost() -> None:
    """The job is deleted and re-created under its name while a reconcile runs: that reconcile saw it gone, the
    wake-up for the new one must still reconcile it."""

    async def scenario() -> list[bool]:
        seen: list[bool] = []
        running, recreated = asyncio.Event(), asyncio.Event()

        async def reconcile(key: Key) -> float | None:
            seen.append(recreated.is_set())
            if len(seen) == 1:
                running.set()
                await recreated.wait()
                return None  # it read the job before the re-creation: gone
            return 60.0

        queue = ReconcileQueue(reconcile, workers=1, resync_seconds=60)
        queue.wake(("ns", "a"))
        await asyncio.wait_for(running.wait(), 5)
        queue.wake(("ns", "a"))  # the new job's event arrives while the old reconcile runs
        recreated.set()
        for _ in range(500):  # poll for the second reconcile, at most 5 s
            if len(seen) == 2:
                break
            await asyncio.sleep(0.01)
        await queue.stop()
        return seen

    assert asyncio.run(scenario()) == [False, True]


@pytest.mark.parametrize(("batch", "most"), [(0.0, 20), (0.3, 1)], ids=["no-batching", "batched"])
def test_a_burst_of_events_is_batched_into_one_reconcile(batch: float, most: int) -> None:
    """Twenty pod events 5 ms apart (a gang starting): without batching nearly each makes a reconcile; with a
    batch window longer than the burst, they make one."""

    async def scenario() -> int:
        runs: list[float] = []

        async def reconcile(key: Key) -> float | None:
            runs.append(asyncio.get_running_loop().time())
            return 60.0

        queue = ReconcileQueue(reconcile, workers=2, resync_seconds=60, batch_seconds=batch)
        for _ in range(20):
            queue.wake(("ns", "gang"))
            await asyncio.sleep(0.005)  # the events' arrival times
        deadline = asyncio.get_running_loop().time() + 5
        while not runs and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        await asyncio.sleep(batch)  # would a late second reconcile follow?
        await queue.stop()
        return len(runs)

    runs = asyncio.run(scenario())
    assert 1 <= runs <= most
    if not batch:
        assert runs > 5, "the burst was merged though nothing batches it: this test measures nothing"
