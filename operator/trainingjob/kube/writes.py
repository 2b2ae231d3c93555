"""How fast the operator writes: the parallel writes of all reconciles share one limit on how many are in flight,
which grows by one for every `limit` writes the apiserver took and halves when it answers 429 (too many
requests, as priority and fairness does under load), between 1 and `most`. Slots go first come, first served: the
write pool's threads alone can fill the limit during a burst of pod creations, and a reconcile's status write must
not wait for the burst to end. A throttled write waits as the apiserver asked (Retry-After) and is tried again,
until its deadline; only then does the reconcile fail.

`windowed` runs one call's writes through a shared thread pool a few at a time, so a 1,024-pod job's creations
queue behind a small job's no longer than a window's worth.
"""

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")
RETRY_AFTER_DEFAULT = 1.0
RETRY_AFTER_LONGEST = 10.0
THROTTLED_DEADLINE = 60.0


class Throttled(Exception):  # noqa: N818
    """The apiserver answered 429 (`answer`, the client's error): try again after `retry_after` seconds."""

    def __init__(self, retry_after: float | None, answer: Exception | None = None) -> None:
        super().__init__(f"throttled; retry after {retry_after} s")
        self.retry_after, self.answer = retry_after, answer


class Pacer:
    def __init__(
        self, most: int, *, clock: Callable[[], float] = time.monotonic, on_throttled: Callable[[], None] = lambda: None
    ) -> None:
        self.most, self.on_throttled = most, on_throttled
        self.limit = float(most)
        self.throttled = 0  # 429 answers so far
        self._in_flight = 0
        self._waiting: deque[object] = deque()  # the writes waiting for a slot, first come first
        self._generation = 0  # bumped at each decrease: answers to writes sent before it do not halve again
        self._changed = threading.Condition()
        self._clock = clock

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @contextmanager
    def _slot(self) -> Iterator[int]:
        """A slot, in the order asked for: a thread that has just let one go and asks again (the write pool's, with
        more queued) waits behind the writes already waiting, so a reconcile's status write is never passed over
        for as long as a burst of pod creations lasts."""
        turn = object()
        with self._changed:
            self._waiting.append(turn)
            try:
                self._changed.wait_for(lambda: self._waiting[0] is turn and self._in_flight < int(self.limit))
            except BaseException:
                self._waiting.remove(turn)
                self._changed.notify_all()
                raise
            self._waiting.popleft()
            self._in_flight += 1
            generation = self._generation
            if self._waiting and self._in_flight < int(self.limit):
                self._changed.notify_all()  # the next in line may go too: there is room
        try:
            yield generation
        finally:
            with self._changed:
                self._in_flight -= 1
                self._changed.notify_all()

    def _took(self) -> None:
        with self._changed:
            self.limit = min(self.most, self.limit + 1 / self.limit)
            self._changed.notify_all()

    def _pushed_back(self, generation: int) -> None:
        with self._changed:
            self.throttled += 1
            self.on_throttled()
            if generation == self._generation:
                self.limit = max(1.0, self.limit / 2)
                self._generation += 1

    def call(self, write: Callable[[], R], *, deadline: float = THROTTLED_DEADLINE) -> R:
        """Run one write within the limit, retrying it while the apiserver throttles, for `deadline` seconds."""
        give_up = self._clock() + deadline
        while True:
            with self._slot() as generation:
                try:
                    result = write()
                except Throttled as error:
                    self._pushed_back(generation)
                    wait_for = min(error.retry_after or RETRY_AFTER_DEFAULT, RETRY_AFTER_LONGEST)
                    if self._clock() + wait_for > give_up:
                        raise
                else:
                    self._took()
                    return result
            time.sleep(wait_for)  # as the apiserver asked, outside the slot


def windowed(pool: ThreadPoolExecutor, work: Callable[[T], R], items: Iterable[T], window: int) -> list[R]:
    """work(item) for every item on the shared pool, at most `window` of this call's at once; results in order.
    The first error is raised once the writes already sent have finished."""
    pending = list(enumerate(items))
    pending.reverse()
    results: dict[int, R] = {}
    running: dict[Future[R], int] = {}
    error: BaseException | None = None
    while pending or running:
        while pending and len(running) < window and error is None:
            index, item = pending.pop()
            running[pool.submit(work, item)] = index
        if not running:
            break
        done, _ = wait(running, return_when=FIRST_COMPLETED)
        for future in done:
            index = running.pop(future)
            if future.exception() is not None:
                error = error or future.exception()
            else:
                results[index] = future.result()
    if error is not None:
        raise error
    return [results[index] for index in sorted(results)]
