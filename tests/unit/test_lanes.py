"""runtime/lanes.py: the queue's workers, shared by new jobs and jobs reconciled before, which take turns when both
wait; first come, first served within a lane; new jobs hold at most half the workers; a wait that is cancelled
gives its worker on."""

import asyncio

import pytest

from trainingjob.runtime.lanes import Lanes

pytestmark = pytest.mark.fast


async def settle() -> None:
    """Let every task that can run do so until it waits (a few turns of the loop; no wall time)."""
    for _ in range(20):
        await asyncio.sleep(0)


async def granted_in_order(lanes: Lanes, arrivals: list[tuple[str, bool]]) -> list[str]:
    """The one worker is busy while `arrivals` (name, new) line up in order; the order they then get it in."""
    order: list[str] = []

    async def take(name: str, new: bool) -> None:
        await lanes.acquire(new)
        order.append(name)
        lanes.release(new)

    await lanes.acquire(new=True)  # the busy worker
    tasks = []
    for name, new in arrivals:
        tasks.append(asyncio.create_task(take(name, new)))
        await settle()  # in line before the next
    lanes.release(new=True)
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=10)
    return order


@pytest.mark.parametrize(
    ("arrivals", "order"),
    [
        pytest.param(
            [("new-1", True), ("new-2", True), ("new-3", True), ("known", False)],
            ["known", "new-1", "new-2", "new-3"],
            id="a-job-reconciled-before-does-not-wait-behind-a-burst-of-new-ones",
        ),
        pytest.param(
            [("known-1", False), ("known-2", False), ("known-3", False), ("new", True)],
            ["known-1", "new", "known-2", "known-3"],
            id="a-new-job-waits-one-turn-behind-a-stream-of-known-ones",
        ),
        pytest.param(
            [("new-1", True), ("known-1", False), ("new-2", True), ("known-2", False)],
            ["known-1", "new-1", "known-2", "new-2"],
            id="turns-when-both-wait",
        ),
        pytest.param(
            [("new-1", True), ("new-2", True), ("new-3", True)],
            ["new-1", "new-2", "new-3"],
            id="first-come-first-served-in-a-lane",
        ),
    ],
)
def test_the_lanes_take_turns(arrivals: list[tuple[str, bool]], order: list[str]) -> None:
    assert asyncio.run(granted_in_order(Lanes(1), arrivals)) == order


def test_no_more_than_the_workers_at_once_and_a_cancelled_wait_gives_its_worker_on() -> None:
    async def scenario() -> tuple[int, int, bool]:
        lanes, busy, most = Lanes(2), [0], [0]
        gate = asyncio.Event()

        async def work() -> None:
            await lanes.acquire(new=False)
            busy[0] += 1
            most[0] = max(most[0], busy[0])
            await gate.wait()
            busy[0] -= 1
            lanes.release(new=False)

        tasks = [asyncio.create_task(work()) for _ in range(5)]
        await settle()
        at_once = busy[0]
        waiter = asyncio.create_task(lanes.acquire(new=True))
        await settle()
        waiter.cancel()  # e.g. the operator stops while a job waits for a worker
        await settle()
        gate.set()
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=10)
        for _ in range(2):  # every worker is free again: taken at once (a lost one would time out here)
            await asyncio.wait_for(lanes.acquire(new=False), timeout=10)
        return at_once, most[0], waiter.cancelled()

    at_once, most, cancelled = asyncio.run(scenario())
    assert (at_once, most, cancelled) == (2, 2, True)


@pytest.mark.parametrize(
    ("workers", "most_new", "known_at_once"),
    [(1, 1, False), (3, 1, True), (4, 2, True), (8, 4, True)],
    ids=["one-worker-a-new-job-may-hold", "three", "four", "eight"],
)
def test_new_jobs_hold_at_most_half_the_workers_and_a_known_job_takes_one_at_once(
    workers: int, most_new: int, known_at_once: bool
) -> None:
    """A first pass holds its worker for seconds, another pass for milliseconds: with every worker on first passes a
    job whose gang came up waited seconds for its turn."""

    async def scenario() -> tuple[int, bool, int]:
        lanes, held = Lanes(workers), [0]
        gate, known_took = asyncio.Event(), asyncio.Event()

        async def first_pass() -> None:
            await lanes.acquire(new=True)
            held[0] += 1
            await gate.wait()
            held[0] -= 1
            lanes.release(new=True)

        async def quick_pass() -> None:
            await lanes.acquire(new=False)
            known_took.set()
            lanes.release(new=False)

        passes = [asyncio.create_task(first_pass()) for _ in range(workers + 2)]
        await settle()
        at_once = held[0]
        passes.append(asyncio.create_task(quick_pass()))
        await settle()
        took = known_took.is_set()
        gate.set()
        await asyncio.wait_for(asyncio.gather(*passes), timeout=10)
        return at_once, took, lanes.waiting()

    assert asyncio.run(scenario()) == (most_new, known_at_once, 0)
