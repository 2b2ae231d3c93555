"""The shared write pace (kube/writes.py): never more writes in flight than its limit, slots given in the order
asked for (a thread that lets one go and asks again waits behind those already waiting), and a 429 halves the
limit and is waited out."""

import threading

import pytest
from testbed.processes import poll_until

from trainingjob.kube.writes import Pacer, Throttled

pytestmark = pytest.mark.fast
DEADLINE = 10.0


def test_a_writer_that_asks_again_waits_behind_the_one_already_waiting() -> None:
    """The write pool's threads let a slot go and ask again at once while pod creations are queued; a reconcile's
    status write waiting meanwhile goes first, or it could wait for as long as the burst lasts."""
    pacer, order = Pacer(1), []
    first_running, first_may_end = threading.Event(), threading.Event()

    def first() -> None:
        first_running.set()
        assert first_may_end.wait(DEADLINE)
        order.append("pool write 1")

    def pool_thread() -> None:
        pacer.call(first)
        pacer.call(lambda: order.append("pool write 2"))

    pool = threading.Thread(target=pool_thread)
    pool.start()
    assert first_running.wait(DEADLINE)
    status = threading.Thread(target=lambda: pacer.call(lambda: order.append("status write")))
    status.start()
    poll_until(lambda: pacer.waiting == 1, timeout=DEADLINE, interval=0.005, what="the status write waiting")
    first_may_end.set()
    pool.join(DEADLINE)
    status.join(DEADLINE)
    assert order == ["pool write 1", "status write", "pool write 2"]
    assert pacer.in_flight == 0 and pacer.waiting == 0


def test_no_more_writes_run_at_once_than_the_limit() -> None:
    pacer, lock, running, most = Pacer(3), threading.Lock(), [0], [0]
    together = threading.Barrier(3, timeout=DEADLINE)  # three at once, or it breaks

    def write() -> None:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        together.wait()
        with lock:
            running[0] -= 1

    threads = [threading.Thread(target=lambda: pacer.call(write)) for _ in range(9)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE)
    assert most[0] == 3 and not together.broken
    assert pacer.in_flight == 0 and pacer.waiting == 0


def test_a_throttled_write_halves_the_limit_and_is_sent_again() -> None:
    pacer, throttled = Pacer(8), [Throttled(0.01)]

    def write() -> str:
        if throttled:
            raise throttled.pop()
        return "written"

    assert pacer.call(write) == "written"
    assert pacer.throttled == 1
    assert pacer.limit == pytest.approx(4.25)  # halved to 4, then one write taken: + 1/4
