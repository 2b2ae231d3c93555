"""Reads of pods (rank 0's progress, its agent's account of the gang) made outside the reconcile slots, so that a
slow or hostile pod delays only its own job.

Each read runs on a small pool of its own. A reconcile waits for its pod's read a short while (`wait`) and, when
the answer is not in yet, goes on without it; the next reconcile of the job takes the answer when it has come.
A read that took longer than the wait (a pod that drips, or does not answer until the exchange's deadline) backs
its pod off: no read of it for 2 s, then 4, 8 ... up to a minute, and no reconcile waits for its reads, until one
is quick again. Pods that drip their headers can so hold the pool's threads for two seconds now and then, but a
reconcile slot only for the wait, once: each costs its own job's progress, not anyone else's reconciles."""

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, TypeVar, cast

T = TypeVar("T")
MAX_BACKOFF_SECONDS = 60.0
FORGET_AFTER_SECONDS = 600.0  # a pod not asked about for this long (gone, or its job done) is forgotten


def backoff_seconds(slow_reads: int) -> float:
    """How long a pod is left alone after this many slow reads in a row: none after none, then 2, 4, 8 ... 60 s."""
    return 0.0 if slow_reads <= 0 else min(MAX_BACKOFF_SECONDS, 2.0**slow_reads)


@dataclass
class _Pod:
    """What is known of one read of a pod: the one under way (or done and not yet taken), and its backoff."""

    read: "Future[Any] | None" = None
    slow_reads: int = 0
    not_before: float = 0.0
    asked: float = 0.0


class PodReads:
    """Reads of pods by key (a pod's UID and what is read), on `threads` threads of their own."""

    def __init__(self, *, threads: int = 16, wait: float = 0.5, clock: Callable[[], float] = time.monotonic) -> None:
        self.wait, self.clock = wait, clock
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="tj-pod-read")
        self.pods: dict[str, _Pod] = {}
        self.lock = threading.Lock()

    def read(self, key: str, read: Callable[[], T], missing: T, *, wait: float | None = None) -> T:
        """The answer of `read()` for the pod `key` if it comes within `wait` seconds (or came since the last call),
        else `missing`, without starting a read while the pod is backed off."""
        future, patient = self._under_way(key, read)
        if future is None:
            return missing
        try:
            answer = cast(T, future.result(timeout=(self.wait if wait is None else wait) if patient else 0))
        except FutureTimeout:
            return missing
        with self.lock:
            pod = self.pods.get(key)
            if pod is not None and pod.read is future:
                pod.read = None  # taken: the next call starts a fresh read
        return answer

    def _under_way(self, key: str, read: Callable[[], Any]) -> "tuple[Future[Any] | None, bool]":
        """The pod's read under way (started now if none is and the pod is not backed off), and whether to wait for
        it: not for a pod whose last read was slow."""
        now = self.clock()
        with self.lock:
            self._forget(now)
            pod = self.pods.setdefault(key, _Pod(asked=now))
            pod.asked = now
            if pod.read is None and now >= pod.not_before:
                pod.read = self.pool.submit(self._timed, key, read)
            return pod.read, pod.slow_reads == 0

    def _timed(self, key: str, read: Callable[[], Any]) -> Any:
        started = self.clock()
        try:
            return read()
        finally:
            ended = self.clock()
            with self.lock:
                pod = self.pods.get(key)
                if pod is not None:
                    pod.slow_reads = pod.slow_reads + 1 if ended - started > self.wait else 0
                    pod.not_before = ended + backoff_seconds(pod.slow_reads)

    def _forget(self, now: float) -> None:
        if len(self.pods) < 256:
            return
        for key in [k for k, p in self.pods.items() if now - p.asked > FORGET_AFTER_SECONDS and p.read is None]:
            del self.pods[key]

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
