"""The reconcile queue's workers, shared by two lanes that take turns: jobs reconciled before, and jobs never
reconciled yet by this operator.

A new job's first pass creates its children, a dozen writes or more; a job reconciled before mostly has a status to
write (its gang came up, a pod failed). In one line, a burst of new jobs kept every other job waiting behind it: with
250 jobs of 8 ranks created at once, a job whose pods had all come up waited for every first pass ahead of it before
the pass that said Running. With two lanes, when both have jobs waiting, a freed worker goes to each lane in turn:
neither waits behind more than the other's turns, and a steady stream of one never starves the other. Within a lane,
first come, first served."""

import asyncio
from collections import deque


class Lanes:
    def __init__(self, workers: int) -> None:
        self._free = workers
        self._lanes: tuple[deque[asyncio.Future[None]], ...] = (deque(), deque())  # reconciled before, new
        self._turn = 0  # the lane a freed worker goes to first when both wait

    def waiting(self) -> int:
        return sum(len(lane) for lane in self._lanes)

    async def acquire(self, new: bool) -> None:
        """Wait for a worker in the lane of a new job, or of one reconciled before."""
        if self._free > 0 and not self.waiting():
            self._free -= 1
            return
        lane = self._lanes[int(new)]
        taken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        lane.append(taken)
        try:
            await taken
        except asyncio.CancelledError:
            if taken.done() and not taken.cancelled():
                self.release()  # handed a worker as it was cancelled: the next in line gets it
            elif taken in lane:
                lane.remove(taken)
            raise

    def release(self) -> None:
        """A worker is free: to the first job waiting in the lane whose turn it is, else in the other."""
        for lane in (self._turn, 1 - self._turn):
            waiting = self._lanes[lane]
            while waiting:
                taken = waiting.popleft()
                if not taken.done():  # (a cancelled wait leaves its lane when its task next runs)
                    taken.set_result(None)
                    self._turn = 1 - lane
                    return
        self._free += 1
