"""A per-job reconcile loop without finalizers: wake a job, and it is reconciled soon, once, never twice at once.

Each job gets an asyncio task that reconciles, then sleeps until the plan's requeue time, the resync period or
the next wake-up, whichever comes first. The task ends when the job is gone. Reconciles run in threads (the
Kubernetes client is synchronous), at most `workers` at a time.
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)
Key = tuple[str, str]
# Reconcile one job; returns the seconds until it wants to run again, or None when the job is gone.
ReconcileFn = Callable[[Key], Awaitable[float | None]]


class ReconcileQueue:
    def __init__(
        self,
        reconcile: ReconcileFn,
        *,
        workers: int,
        resync_seconds: float,
        on_depth: Callable[[int], None] = lambda _: None,
    ) -> None:
        self._reconcile = reconcile
        self._slots = asyncio.Semaphore(workers)
        self._resync = resync_seconds
        self._wakeups: dict[Key, asyncio.Event] = {}
        self._tasks: dict[Key, asyncio.Task[None]] = {}
        self._on_depth = on_depth

    def wake(self, key: Key) -> None:
        """Reconcile this job soon; wake-ups that arrive while it is being reconciled are merged into one more."""
        event = self._wakeups.setdefault(key, asyncio.Event())
        event.set()
        if key not in self._tasks:
            self._tasks[key] = asyncio.create_task(self._loop(key), name=f"reconcile {key[0]}/{key[1]}")
        self._on_depth(sum(e.is_set() for e in self._wakeups.values()))

    async def _loop(self, key: Key) -> None:
        event = self._wakeups[key]
        try:
            while True:
                await event.wait()
                event.clear()
                async with self._slots:
                    delay = await self._run_once(key)
                if delay is None:
                    return
                try:
                    await asyncio.wait_for(event.wait(), timeout=min(delay, self._resync))
                except TimeoutError:
                    event.set()
        finally:
            self._tasks.pop(key, None)
            self._wakeups.pop(key, None)

    async def _run_once(self, key: Key) -> float | None:
        try:
            return await self._reconcile(key)
        except Exception:
            log.exception("reconcile of %s/%s failed; retrying in 5 s", *key)
            return 5.0

    async def stop(self) -> None:
        for task in list(self._tasks.values()):
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
