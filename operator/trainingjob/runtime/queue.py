"""A per-job reconcile loop without finalizers: wake a job, and it is reconciled soon, once, never twice at once.

Each job gets an asyncio task that reconciles, then sleeps until the plan's requeue time, the resync period or
the next wake-up, whichever comes first. The task ends when the job is gone. Reconciles run in threads (the
Kubernetes client is synchronous), at most `workers` at a time (a job's first reconcile and the others take
turns: runtime/lanes.py), and only while the gate is open (while this operator holds the leader Lease). A
reconcile that fails is retried with a backoff per job: quickly (at most a second apart) while the apiserver is
unreachable, so the operator acts again as soon as it answers; slower for other errors, which are logged with
their traceback once, not on every retry; never sooner than the apiserver asked (a 429's Retry-After, when the
write pace's own wait for it ran out). After each reconcile a job rests as long as `rest` says before the next
(the controller makes a large gang's reconciles rest as long as they take: runtime/controller.py).
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

from trainingjob.runtime.lanes import Lanes

log = logging.getLogger(__name__)
Key = tuple[str, str]
# Reconcile one job; returns the seconds until it wants to run again, or None when the job is gone.
ReconcileFn = Callable[[Key], Awaitable[float | None]]
TRANSIENT_RETRY = (0.1, 1.0)  # first delay, longest delay
ERROR_RETRY = (0.5, 30.0)


def retry_delay(failures: int, transient: bool) -> float:
    """The delay before retry number `failures` (1, 2, ...): doubling from the first delay up to the longest."""
    first, longest = TRANSIENT_RETRY if transient else ERROR_RETRY
    return float(min(first * 2 ** min(failures - 1, 20), longest))


class ReconcileQueue:
    def __init__(
        self,
        reconcile: ReconcileFn,
        *,
        workers: int,
        resync_seconds: float,
        on_depth: Callable[[int], None] = lambda _: None,
        is_transient: Callable[[Exception], bool] = lambda _: False,
        retry_after: Callable[[Exception], float | None] = lambda _: None,
        gate: asyncio.Event | None = None,
        batch_seconds: float = 0.0,
        rest: Callable[[Key], float] = lambda _: 0.0,
        is_new: Callable[[Key], bool] = lambda _: True,
    ) -> None:
        self._reconcile = reconcile
        self._is_new = is_new
        self._batch = batch_seconds
        self._rest = rest
        self._not_before: dict[Key, float] = {}
        self._slots = Lanes(workers)
        self._resync = resync_seconds
        self._wakeups: dict[Key, asyncio.Event] = {}
        self._tasks: dict[Key, asyncio.Task[None]] = {}
        self._failures: dict[Key, int] = {}
        self._waiting: set[Key] = set()  # woken and not yet taken up by a worker: the depth, kept as it changes
        self._on_depth = on_depth
        self._is_transient = is_transient
        self._retry_after = retry_after
        self.gate = gate or asyncio.Event()
        if gate is None:
            self.gate.set()

    @property
    def batch_seconds(self) -> float:
        """How long a woken key waits before its reconcile: the changes meanwhile make the same one."""
        return self._batch

    def wake(self, key: Key) -> None:
        """Reconcile this job soon; wake-ups that arrive while it is being reconciled are merged into one more."""
        self._wakeups.setdefault(key, asyncio.Event())
        self._set_waiting(key, True)
        if key not in self._tasks:
            self._tasks[key] = asyncio.create_task(self._loop(key), name=f"reconcile {key[0]}/{key[1]}")

    def wake_all(self, keys: Iterable[Key]) -> None:
        for key in keys:
            self.wake(key)

    def _set_waiting(self, key: Key, waiting: bool) -> None:
        """Set or clear the job's wake-up, and tell on_depth how many jobs wait for a reconcile."""
        event = self._wakeups.get(key)
        if waiting and event is not None:
            event.set()
            self._waiting.add(key)
        else:
            if event is not None:
                event.clear()
            self._waiting.discard(key)
        self._on_depth(len(self._waiting))

    async def _loop(self, key: Key) -> None:
        event, loop = self._wakeups[key], asyncio.get_running_loop()
        # A job's first reconcile in this operator waits in the lane of new jobs (runtime/lanes.py), unless `is_new`
        # says its children were made before (an operator that just started or took over the Lease).
        reconciled = not self._is_new(key)
        try:
            while True:
                await event.wait()
                # Let the rest of a burst of events arrive (one reconcile for them all), and let the job rest after
                # its last reconcile for as long as `rest` asked.
                pause = max(self._batch, self._not_before.get(key, 0.0) - loop.time())
                if pause > 0:
                    await asyncio.sleep(pause)
                await self.gate.wait()
                new = not reconciled
                await self._slots.acquire(new)
                try:
                    if not self.gate.is_set():  # closed while this waited for a slot: still woken, for later
                        continue
                    self._set_waiting(key, False)  # wake-ups from here on ask for one more reconcile
                    delay = await self._run_once(key)
                    reconciled = reconciled or key not in self._failures  # a first pass that failed is still new
                    self._not_before[key] = loop.time() + self._rest(key)
                finally:
                    self._slots.release(new)
                if delay is None:
                    if event.is_set():  # woken while it ran: the job may be back (re-created under its name)
                        continue
                    return
                try:
                    await asyncio.wait_for(event.wait(), timeout=min(delay, self._resync))
                except TimeoutError:
                    self._set_waiting(key, True)
        finally:
            self._set_waiting(key, False)
            self._tasks.pop(key, None)
            self._wakeups.pop(key, None)
            self._failures.pop(key, None)
            self._not_before.pop(key, None)

    async def _run_once(self, key: Key) -> float | None:
        try:
            delay = await self._reconcile(key)
        except Exception as error:
            failures = self._failures[key] = self._failures.get(key, 0) + 1
            transient = self._is_transient(error)
            wait = max(retry_delay(failures, transient), self._retry_after(error) or 0.0)
            if transient:
                log.warning("%s/%s: the apiserver did not answer (%s); retrying in %.1f s", *key, error, wait)
            elif failures == 1:
                log.exception("%s/%s: reconcile failed; retrying in %.1f s", *key, wait)
            else:
                log.warning("%s/%s: reconcile failed again (%d times): %s", *key, failures, error)
            return wait
        self._failures.pop(key, None)
        return delay

    async def stop(self) -> None:
        for task in list(self._tasks.values()):
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
