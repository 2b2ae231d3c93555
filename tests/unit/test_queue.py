"""The reconcile queue: one reconcile per job at a time, wake-ups merged, nothing while the gate (the Lease) is
closed, and failures retried with a backoff that stays short while the apiserver is unreachable."""

import asyncio
import itertools
import logging
from collections import Counter
from collections.abc import Callable

import pytest
from kubernetes.client import ApiException

from trainingjob.kube.answers import is_transient, retry_after
from trainingjob.runtime.queue import ERROR_RETRY, TRANSIENT_RETRY, Key, ReconcileQueue, retry_delay

pytestmark = pytest.mark.fast

DEADLINE = 10.0  # seconds: the most any wait below takes before it fails


async def settle() -> None:
    """Let every task that can run do so until it waits (a few turns of the loop; no wall time)."""
    for _ in range(20):
        await asyncio.sleep(0)


async def until(what: Callable[[], bool], description: str) -> None:
    """Yield to the loop until `what` holds; fail after DEADLINE seconds."""
    loop = asyncio.get_running_loop()
    end = loop.time() + DEADLINE
    while not what():
        assert loop.time() < end, f"timed out waiting for {description}"
        await asyncio.sleep(0.01)


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
        running, release, second = asyncio.Event(), asyncio.Event(), asyncio.Event()

        async def reconcile(key: Key) -> float | None:
            assert key not in busy, "two reconciles of one job at once"
            busy.add(key)
            runs[key] += 1
            if runs[key] == 1:
                running.set()
                await release.wait()  # the first reconcile runs until the test has woken the job again
            busy.discard(key)
            if runs[key] == 2:
                second.set()
            return None if runs[key] >= 2 else 60.0

        queue = ReconcileQueue(reconcile, workers=4, resync_seconds=60)
        for _ in range(10):
            queue.wake(("ns", "a"))
        await asyncio.wait_for(running.wait(), DEADLINE)
        for _ in range(10):
            queue.wake(("ns", "a"))  # while it runs: merged into one more
        release.set()
        await asyncio.wait_for(second.wait(), DEADLINE)
        await settle()  # a third reconcile, were the wake-ups not merged, would start here
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
        await settle()  # both loops have run as far as the gate lets them
        assert not done
        gate.set()
        await until(lambda: len(done) == 2, "both reconciled once the gate opened")
        await queue.stop()
        return done

    assert sorted(asyncio.run(scenario())) == [("ns", "a"), ("ns", "b")]


def test_a_job_waiting_for_a_worker_when_the_gate_closes_waits_for_the_gate_again() -> None:
    """A Lease lost while a job waits for a free worker: the worker it gets must not start its reconcile."""

    async def scenario() -> list[Key]:
        done: list[Key] = []
        running, release = asyncio.Event(), asyncio.Event()

        async def reconcile(key: Key) -> float | None:
            if key == ("ns", "a"):
                running.set()
                await release.wait()
            done.append(key)
            return None

        gate = asyncio.Event()
        gate.set()
        queue = ReconcileQueue(reconcile, workers=1, resync_seconds=60, gate=gate)
        queue.wake(("ns", "a"))
        await asyncio.wait_for(running.wait(), DEADLINE)
        queue.wake(("ns", "b"))  # waits for a's worker
        await settle()
        gate.clear()  # the Lease is lost while a runs and b waits
        release.set()
        await until(lambda: ("ns", "a") in done, "a's reconcile to end")
        await settle()
        assert done == [("ns", "a")], "b was reconciled while the gate was closed"
        gate.set()
        await until(lambda: len(done) == 2, "b reconciled once the gate opened again")
        await queue.stop()
        return done

    assert asyncio.run(scenario()) == [("ns", "a"), ("ns", "b")]


def test_an_unreachable_apiserver_is_retried_within_a_second(caplog: pytest.LogCaptureFixture) -> None:
    """The delays the queue chose (it says them in its warnings) are the transient ones, at most a second, and it
    waited them: what it decides, not how promptly a busy machine woke it, is what is checked."""

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
        await until(lambda: len(attempts) >= 6, "six attempts")
        await queue.stop()
        return [b - a for a, b in itertools.pairwise(attempts)]

    with caplog.at_level(logging.WARNING, logger="trainingjob.runtime.queue"):
        gaps = asyncio.run(scenario())
    chosen = [float(str(r.args[-1])) for r in caplog.records if "retrying in" in r.msg and isinstance(r.args, tuple)]
    assert chosen == [retry_delay(n, transient=True) for n in range(1, 6)] == [0.1, 0.2, 0.4, 0.8, 1.0]
    assert all(gap >= delay * 0.99 for gap, delay in zip(gaps, chosen, strict=True)), (gaps, chosen)


def _throttled(retry_after: str | None) -> ApiException:
    """The apiserver's 429, as the client raises it once the write pace's own wait for it ran out."""
    error = ApiException(status=429, reason="Too Many Requests")
    error.headers = {"Retry-After": retry_after} if retry_after else {}
    return error


@pytest.mark.parametrize(
    ("asked", "chosen"), [("5", 5.0), (None, 0.1), ("0", 0.1)], ids=["retry-after-5", "none-asked", "retry-after-0"]
)
def test_a_throttled_reconcile_is_retried_no_sooner_than_the_apiserver_asked(
    asked: str | None, chosen: float, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        failed = asyncio.Event()

        async def reconcile(key: Key) -> float | None:
            failed.set()
            raise _throttled(asked)

        queue = ReconcileQueue(
            reconcile, workers=1, resync_seconds=60, is_transient=is_transient, retry_after=retry_after
        )
        queue.wake(("ns", "a"))
        await asyncio.wait_for(failed.wait(), DEADLINE)
        await settle()
        await queue.stop()

    with caplog.at_level(logging.WARNING, logger="trainingjob.runtime.queue"):
        asyncio.run(scenario())
    delays = [float(str(r.args[-1])) for r in caplog.records if "retrying in" in r.msg and isinstance(r.args, tuple)]
    assert delays[:1] == [chosen]


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
        await asyncio.wait_for(running.wait(), DEADLINE)
        queue.wake(("ns", "a"))  # the new job's event arrives while the old reconcile runs
        recreated.set()
        await until(lambda: len(seen) == 2, "the second reconcile")
        await queue.stop()
        return seen

    assert asyncio.run(scenario()) == [False, True]


@pytest.mark.parametrize(("batch", "most"), [(0.0, 20), (0.3, 1)], ids=["no-batching", "batched"])
def test_a_burst_of_events_is_batched_into_one_reconcile(batch: float, most: int) -> None:
    """Twenty pod events (a gang starting), each after the queue has done all it would do with the one before:
    without batching nearly each makes a reconcile; with a batch window they make one. The burst takes loop turns,
    not wall time, so it fits the window however slowly a busy machine runs the loop."""

    async def scenario() -> int:
        runs: list[float] = []

        async def reconcile(key: Key) -> float | None:
            runs.append(asyncio.get_running_loop().time())
            return 60.0

        queue = ReconcileQueue(reconcile, workers=2, resync_seconds=60, batch_seconds=batch)
        for _ in range(20):
            queue.wake(("ns", "gang"))
            await settle()  # the events' arrival: apart, as far as the queue can tell
        await until(lambda: bool(runs), "a reconcile")
        await asyncio.sleep(batch)  # would a late second reconcile follow? (a window to see one, not a wait on it)
        await queue.stop()
        return len(runs)

    runs = asyncio.run(scenario())
    assert 1 <= runs <= most
    if not batch:
        assert runs > 5, "the burst was merged though nothing batches it: this test measures nothing"


REST = 0.3


def test_a_job_rests_after_each_reconcile_as_long_as_its_rest_says() -> None:
    """A gang's reconcile asks for a rest (the controller's: as long as it took to decide): woken again at once by
    more pod events, its next reconcile still starts no sooner than the rest after the last one ended."""

    async def scenario() -> float:
        loop = asyncio.get_running_loop()
        times: list[float] = []

        async def reconcile(key: Key) -> float | None:
            times.append(loop.time())
            return 60.0

        queue = ReconcileQueue(reconcile, workers=1, resync_seconds=60, rest=lambda _: REST)
        queue.wake(("ns", "gang"))
        await until(lambda: len(times) == 1, "the first reconcile")
        queue.wake(("ns", "gang"))  # its pods' next events, at once
        await until(lambda: len(times) == 2, "the second reconcile")
        await queue.stop()
        return times[1] - times[0]

    assert asyncio.run(scenario()) >= REST  # without it, the second follows at once


def test_a_job_that_rests_holds_up_no_other() -> None:
    """While a gang rests (here far longer than the test), a small job woken meanwhile is reconciled at once."""
    gang, small = ("ns", "gang"), ("ns", "small")

    async def scenario() -> list[Key]:
        order: list[Key] = []

        async def reconcile(key: Key) -> float | None:
            order.append(key)
            return 60.0

        queue = ReconcileQueue(reconcile, workers=1, resync_seconds=60, rest=lambda key: 600.0 if key == gang else 0.0)
        queue.wake(gang)
        await until(lambda: order == [gang], "the gang's first reconcile")
        queue.wake(gang)
        queue.wake(small)
        await until(lambda: small in order, "the small job's reconcile")
        await queue.stop()
        return order

    assert asyncio.run(scenario()) == [("ns", "gang"), ("ns", "small")]


@pytest.mark.parametrize(
    ("started_before", "most_at_once"),
    [(False, 2), (True, 4)],
    ids=["new-jobs-hold-half-the-workers", "jobs-that-ran-before-a-restart-take-every-worker"],
)
def test_only_jobs_never_started_wait_in_the_lane_of_new_jobs(started_before: bool, most_at_once: int) -> None:
    """After a restart or a takeover every job is reconciled for the first time in this operator, but only those
    whose status names no attempt make their children in that pass (the slow one the lane holds to half)."""
    jobs = [("ns", f"job-{i}") for i in range(6)]

    async def scenario() -> int:
        running, most, gate = [0], [0], asyncio.Event()

        async def reconcile(key: Key) -> float | None:
            running[0] += 1
            most[0] = max(most[0], running[0])
            await gate.wait()
            running[0] -= 1
            return 60.0

        queue = ReconcileQueue(reconcile, workers=4, resync_seconds=60, is_new=lambda key: not started_before)
        queue.wake_all(jobs)
        await until(lambda: running[0] == most_at_once, f"{most_at_once} reconciles at once")
        await settle()  # no more start: the rest wait for a worker
        at_once = running[0]
        gate.set()
        await queue.stop()
        return at_once

    assert asyncio.run(scenario()) == most_at_once
