"""Write pacing: the shared limit halves on 429 (once per burst), grows back as writes succeed, never lets more
writes fly than it allows, retries a throttled write as asked and gives up at its deadline; and a big call's
writes leave room in the shared pool for a small call's."""

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import pytest

from trainingjob.kube.writes import Pacer, Throttled, windowed
from trainingjob.plan.waves import waves

pytestmark = pytest.mark.fast

TIMEOUT = 10.0
R = TypeVar("R")


def test_a_burst_of_429s_halves_the_limit_once_and_successes_grow_it_back() -> None:
    pacer = Pacer(16)
    answers: Iterator[Throttled | str] = iter([Throttled(0.001), Throttled(0.001), "ok"])

    def write() -> str:
        answer = next(answers)
        if isinstance(answer, Throttled):
            raise answer
        return answer

    assert pacer.call(write) == "ok"
    assert pacer.throttled == 2 and pacer.limit == pytest.approx(4 + 1 / 4)  # halved twice: each retry was sent anew
    for _ in range(200):
        pacer.call(lambda: None)
    assert pacer.limit == 16


def test_answers_to_writes_sent_before_a_decrease_do_not_halve_again() -> None:
    """Eight writes in flight all get 429: the limit halves once, not eight times."""
    pacer, release, entered = Pacer(8), threading.Event(), threading.Barrier(9)

    def write() -> None:
        entered.wait(TIMEOUT)
        release.wait(TIMEOUT)
        raise Throttled(0.001)

    errors: list[BaseException] = []

    def one() -> None:
        try:
            pacer.call(write, deadline=0)
        except Throttled as error:
            errors.append(error)

    threads = [threading.Thread(target=one) for _ in range(8)]
    for thread in threads:
        thread.start()
    entered.wait(TIMEOUT)  # all eight are in flight
    release.set()
    for thread in threads:
        thread.join(TIMEOUT)
    assert len(errors) == 8 and pacer.throttled == 8 and pacer.limit == 4


def test_never_more_writes_in_flight_than_the_limit() -> None:
    pacer, lock, peak, current = Pacer(3), threading.Lock(), [0], [0]

    def write() -> None:
        with lock:
            current[0] += 1
            peak[0] = max(peak[0], current[0])
        time.sleep(0.001)  # a write's round trip, so that twelve threads would overlap without the limit
        with lock:
            current[0] -= 1

    with ThreadPoolExecutor(12) as pool:
        list(pool.map(lambda _: pacer.call(write), range(300)))
    assert 1 <= peak[0] <= 3 and pacer.in_flight == 0


def test_a_write_throttled_past_its_deadline_raises() -> None:
    pacer = Pacer(4)

    def write() -> None:
        raise Throttled(5.0)

    with pytest.raises(Throttled):
        pacer.call(write, deadline=1.0)
    assert pacer.throttled == 1


class SignallingPool(ThreadPoolExecutor):
    """A pool that records what was submitted to it, in order, and sets `sent` once `last` (an item) was."""

    def __init__(self, workers: int, last: str, sent: threading.Event) -> None:
        super().__init__(workers)
        self.last, self.sent = last, sent
        self.submitted: list[Any] = []
        self.lock = threading.Lock()

    def submit(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> Future[R]:
        with self.lock:
            future = super().submit(fn, *args, **kwargs)
            self.submitted.append(args[0] if args else None)
        if args == (self.last,):
            self.sent.set()
        return future


def test_a_small_calls_writes_are_not_queued_behind_a_big_calls() -> None:
    """A 1,000-item call and, just after, a 4-item call on one pool of 4 threads: the small call's items go to the
    pool's queue right behind the big call's first window, not after its 1,000 (the pool runs its queue in order).
    The big call's first window holds the pool's threads until the small call has sent its items, so what is queued
    ahead of them depends on the windows, not on how the machine schedules the threads; the order the items then
    finish in does (a thread can be descheduled between taking an item and recording it), so it is not asserted."""
    order: list[str] = []
    lock, small_sent, holding = threading.Lock(), threading.Event(), threading.Semaphore(0)

    def work(item: str) -> str:
        if not small_sent.is_set():  # the big call's first window
            holding.release()
            small_sent.wait(TIMEOUT)
        with lock:
            order.append(item)
        time.sleep(0.001)  # a write's round trip
        return item

    with SignallingPool(4, "small-3", small_sent) as pool:
        big = threading.Thread(target=windowed, args=(pool, work, [f"big-{i}" for i in range(1000)], 4))
        big.start()
        assert all(holding.acquire(timeout=TIMEOUT) for _ in range(4)), "the big call's first window never ran"
        small = windowed(pool, work, [f"small-{i}" for i in range(4)], 4)
        big.join(TIMEOUT)
    assert small == [f"small-{i}" for i in range(4)]
    # Ahead of the small call's four: the big call's window that was running, none of its next.
    expected = [*(f"big-{i}" for i in range(4)), *(f"small-{i}" for i in range(4))]
    assert pool.submitted[:8] == expected, pool.submitted[:12]
    assert len(order) == 1004 and sorted(order) == sorted(pool.submitted)


def test_windowed_keeps_order_and_raises_the_first_error_after_the_sent_ones_finish() -> None:
    finished: list[int] = []

    def work(item: int) -> int:
        if item == 3:
            raise ValueError("refused")
        finished.append(item)
        return item * 10

    with ThreadPoolExecutor(2) as pool:
        assert windowed(pool, lambda i: i * 10, range(7), 3) == [0, 10, 20, 30, 40, 50, 60]
        with pytest.raises(ValueError, match="refused"):
            windowed(pool, work, range(20), 2)
    assert len(finished) < 20  # nothing more was sent once one had failed


@pytest.mark.parametrize(
    ("count", "first", "sizes"),
    [
        pytest.param(0, 16, [], id="nothing"),
        pytest.param(8, 16, [8], id="a small job in one wave"),
        pytest.param(31, 16, [31], id="less than two first waves: one"),
        pytest.param(32, 16, [16, 16], id="two first waves"),
        pytest.param(100, 16, [16, 32, 52], id="the last takes the rest"),
        pytest.param(1024, 16, [16, 32, 64, 128, 256, 528], id="a 1,024-rank gang"),
        pytest.param(5, 1, [1, 2, 2], id="first of one: the last wave is cut short"),
        pytest.param(3, 0, [1, 2], id="a first of zero is one"),
    ],
)
def test_waves_double_and_keep_the_order(count: int, first: int, sizes: list[int]) -> None:
    result = waves(list(range(count)), first)
    assert [len(w) for w in result] == sizes
    assert [item for wave in result for item in wave] == list(range(count))
