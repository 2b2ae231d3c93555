"""Reads of pods outside the reconcile slots (kube/pod_reads.py): a reconcile waits for its pod's answer a short while
and no more; an answer that comes late is taken by the next call; a pod that answered slowly is left alone for a
while (2 s, 4, 8 ... 60), and a quick answer ends that. Reads are played by functions that block on events and move
a fake clock, so nothing depends on how fast this machine is."""

import threading
import time
from collections.abc import Callable

import pytest
from testbed.processes import poll_until

from trainingjob.kube.pod_reads import MAX_BACKOFF_SECONDS, PodReads, backoff_seconds

pytestmark = pytest.mark.fast
MISSING = "missing"
KEY = "uid/progress"
LONG = 30.0  # how long a call may wait for an answer the test has already let through


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Pod:
    """A pod's endpoint: each read is counted, waits until let through, and takes `seconds` of the fake clock."""

    def __init__(self, clock: Clock, answer: str = "report", seconds: float = 0.0) -> None:
        self.clock, self.answer, self.seconds = clock, answer, seconds
        self.reads, self.through = 0, threading.Event()

    def read(self) -> str:
        self.reads += 1
        self.through.wait(LONG)
        self.clock.now += self.seconds
        return self.answer


def reads(clock: Clock) -> PodReads:
    return PodReads(threads=4, wait=0.05, clock=clock)


def settled(reader: PodReads, key: str) -> Callable[[], bool]:
    def done() -> bool:
        under_way = reader.pods[key].read
        return under_way is not None and under_way.done()

    return done


@pytest.mark.parametrize(
    ("slow_reads", "seconds"),
    [(0, 0.0), (1, 2.0), (2, 4.0), (3, 8.0), (5, 32.0), (6, MAX_BACKOFF_SECONDS), (40, MAX_BACKOFF_SECONDS)],
    ids=["quick", "one", "two", "three", "five", "six-capped", "many-capped"],
)
def test_backoff_doubles_from_two_seconds_to_a_minute(slow_reads: int, seconds: float) -> None:
    assert backoff_seconds(slow_reads) == seconds


def test_a_quick_answer_is_returned_by_the_call_that_asked() -> None:
    clock = Clock()
    pod = Pod(clock)
    pod.through.set()
    reader = PodReads(threads=4, wait=LONG, clock=clock)
    assert reader.read("uid/progress", pod.read, MISSING) == "report"
    assert reader.read("uid/progress", pod.read, MISSING) == "report" and pod.reads == 2  # each call asks afresh


def test_a_late_answer_is_taken_by_the_next_call_without_asking_again() -> None:
    clock = Clock()
    pod, reader = Pod(clock), reads(clock)
    assert reader.read("uid/progress", pod.read, MISSING) == MISSING  # the call did not wait for the pod
    pod.through.set()
    poll_until(settled(reader, "uid/progress"), timeout=LONG, what="the read to end")
    assert reader.read("uid/progress", pod.read, MISSING) == "report" and pod.reads == 1


def test_a_slow_pod_is_backed_off_and_not_waited_for_until_it_answers_quickly() -> None:
    clock = Clock()
    slow, reader = Pod(clock, seconds=2.5), reads(clock)  # answers only at the exchange's deadline
    slow.through.set()
    assert reader.read(KEY, slow.read, MISSING, wait=LONG) == "report"  # a pod without a history is waited for
    assert (reader.pods[KEY].slow_reads, reader.pods[KEY].not_before) == (1, clock.now + 2)
    assert reader.read(KEY, slow.read, MISSING) == MISSING and slow.reads == 1  # left alone for 2 s
    clock.now += 1.9
    assert reader.read(KEY, slow.read, MISSING) == MISSING and slow.reads == 1
    clock.now += 0.2
    slow.through.clear()
    started = time.monotonic()
    assert reader.read(KEY, slow.read, MISSING, wait=LONG) == MISSING  # asked again, but not waited for
    assert time.monotonic() - started < LONG / 2
    poll_until(lambda: slow.reads == 2, timeout=LONG, what="the pod asked")
    slow.through.set()
    poll_until(settled(reader, KEY), timeout=LONG, what="the read to end")
    assert (reader.pods[KEY].slow_reads, reader.pods[KEY].not_before) == (2, clock.now + 4)
    assert reader.read(KEY, slow.read, MISSING) == "report" and slow.reads == 2  # the late answer, taken
    slow.seconds = 0.0  # the pod answers quickly again
    clock.now += 4.1
    reader.read(KEY, slow.read, MISSING)
    poll_until(settled(reader, KEY), timeout=LONG, what="a quick answer")
    assert reader.pods[KEY].slow_reads == 0
    assert reader.read(KEY, slow.read, MISSING) == "report" and slow.reads == 3  # taken
    assert reader.read(KEY, slow.read, MISSING, wait=LONG) == "report" and slow.reads == 4  # waited for again


def test_pods_that_never_answer_hold_no_caller_and_no_other_pod() -> None:
    clock = Clock()
    reader = reads(clock)
    hostile = [Pod(clock) for _ in range(3)]  # three of the four threads, held until the test ends
    for number, pod in enumerate(hostile):
        assert reader.read(f"hostile-{number}/progress", pod.read, MISSING) == MISSING
    honest = Pod(clock, answer="honest")
    honest.through.set()
    assert reader.read("honest/progress", honest.read, MISSING, wait=LONG) == "honest"
    for pod in hostile:
        pod.through.set()
