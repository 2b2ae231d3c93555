"""The reconcile queue's workers, shared by two lanes that take turns: jobs reconciled before, and new jobs (never
reconciled yet by this operator, and whose status names no attempt: after a restart or a takeover, the jobs that
ran before are not new).

A new job's first pass creates its children, a dozen writes or more; a job reconciled before mostly has a status to
write (its gang came up, a pod failed). In one line, a burst of new jobs kept every other job waiting behind it: with
250 jobs of 8 ranks created at once, a job whose pods had all come up waited for every first pass ahead of it before
the pass that said Running. With two lanes, when both have jobs waiting, a freed worker goes to each lane in turn:
neither waits behind more than the other's turns, and a steady stream of one never starves the other. Within a lane,
first come, first served.

Turns share the grants, not the time: a first pass holds its worker for seconds under load (its writes wait for the
shared pace), another pass for milliseconds. With every worker on a first pass, a job whose gang had come up still
waited seconds for its turn (the status lag's tail at 250 jobs: p99 4-10 s, all of it between the operator seeing
the last pod run and the pass starting). So new jobs hold at most half the workers at once (at least one): the
other half keeps turning over the quick passes."""

import asyncio
from collections import deque

KNOWN, NEW = 0, 1


class Lanes:
    def __init__(self, workers: int) -> None:
        self._free = workers
        self._most_new = max(1, workers // 2)  # the workers new jobs may hold at once
        self._held = [0, 0]  # workers held by each lane
        self._lanes: tuple[deque[asyncio.Future[None]], ...] = (deque(), deque())  # reconciled before, new
        self._turn = KNOWN  # the lane a freed worker goes to first when both wait

    def waiting(self) -> int:
        return sum(len(lane) for lane in self._lanes)

    async def acquire(self, new: bool) -> None:
        """Wait for a worker in the lane of a new job, or of one reconciled before; give it back with
        release(new), the same `new`."""
        lane = self._lanes[int(new)]
        taken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        lane.append(taken)
        self._hand_out()
        try:
            await taken
        except asyncio.CancelledError:
            if taken.done() and not taken.cancelled():
                self.release(new)  # handed a worker as it was cancelled: the next in line gets it
            elif taken in lane:
                lane.remove(taken)
            raise

    def release(self, new: bool) -> None:
        """A worker of the lane `new` is free: to the first job waiting in the lane whose turn it is, else in the
        other."""
        self._held[int(new)] -= 1
        self._free += 1
        self._hand_out()

    def _hand_out(self) -> None:
        while self._free > 0 and (lane := self._next_lane()) is not None:
            self._lanes[lane].popleft().set_result(None)
            self._free -= 1
            self._held[lane] += 1
            self._turn = 1 - lane

    def _next_lane(self) -> int | None:
        """The lane whose first live wait gets the next worker: the one whose turn it is, else the other; never
        the new jobs' while they hold their most."""
        for lane in (self._turn, 1 - self._turn):
            waiting = self._lanes[lane]
            while waiting and waiting[0].done():  # a cancelled wait leaves its lane here
                waiting.popleft()
            if waiting and (lane == KNOWN or self._held[NEW] < self._most_new):
                return lane
        return None
