"""The reconciles running now, each in a thread of its own, and stepping down from leadership once they end.

A reconcile's thread runs on when the asyncio task that awaits it is cancelled, so an operator that stops leading
waits for these threads, not for its tasks: it stops taking work, waits for the reconciles in flight to end
(bounded), and only then gives its Lease up, so the next leader never acts beside a reconcile of the last one.
A reconcile still running at the deadline, or one of a leader that was paused past its lease, is fenced: the
runtime's cluster ports refuse its writes once this operator no longer leads (runtime.cached), and its deletes
name the objects they were decided on (kube.resources)."""

import asyncio
import logging
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")


class InFlight:
    """The work running now, by name ("job ns/name"); safe from any thread. `run` runs it on threads of its own,
    `threads` of them: never on the asyncio loop's default executor, which has fewer threads than the operator's
    workers on a small machine (cpu_count + 4), and which the Lease's renewals, a drain's wait and the metrics
    endpoint use: reconciles that hold every thread there would delay those, and a late renewal loses the Lease."""

    def __init__(self, threads: int = 1) -> None:
        self._running: Counter[str] = Counter()
        self._changed = threading.Condition()
        self._threads = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="tj-reconcile")

    async def run(self, name: str, work: Callable[[], T]) -> T:
        """`work` on one of this object's threads, counted as running under `name` while it runs (a cancelled
        caller's thread runs on, and is waited for as such)."""

        def counted() -> T:
            with self.running(name):
                return work()

        return await asyncio.get_running_loop().run_in_executor(self._threads, counted)

    def close(self) -> None:
        """No more work; a thread still running ends on its own."""
        self._threads.shutdown(wait=False)

    @contextmanager
    def running(self, name: str) -> Iterator[None]:
        with self._changed:
            self._running[name] += 1
        try:
            yield
        finally:
            with self._changed:
                self._running[name] -= 1
                if not self._running[name]:
                    del self._running[name]
                self._changed.notify_all()

    def names(self) -> list[str]:
        with self._changed:
            return sorted(self._running)

    def wait(self, timeout: float) -> list[str]:
        """Block until nothing runs, for at most `timeout` seconds; what still runs then."""
        with self._changed:
            self._changed.wait_for(lambda: not self._running, timeout)
            return sorted(self._running)


async def drain(in_flight: InFlight, why: str, timeout: float) -> list[str]:
    """Wait (in a thread) for the reconciles in flight to end, at most `timeout` seconds, saying in the log what
    was waited for; the ones still running at the deadline."""
    waited = in_flight.names()
    if not waited:
        return []
    log.info("%s: waiting up to %.0f s for %d reconcile(s) in flight: %s", why, timeout, len(waited), _few(waited))
    left = await asyncio.to_thread(in_flight.wait, timeout)
    if left:
        log.warning("%s: %d reconcile(s) still running after %.0f s: %s", why, len(left), timeout, _few(left))
    else:
        log.info("%s: the reconcile(s) in flight ended: %s", why, _few(waited))
    return left


async def step_down(
    close: Callable[[], None], in_flight: InFlight, release: Callable[[], Awaitable[None]], timeout: float
) -> None:
    """Stop taking work (`close`), wait for the reconciles in flight (bounded), then give the Lease up
    (`release`)."""
    close()
    await drain(in_flight, "stepping down", timeout)
    await release()


def _few(names: list[str], most: int = 10) -> str:
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")
