"""Local mode's stand-in for a cluster short of room: `tjctl run --capacity N`, or `4,2@150,4@300` (4 worker slots,
2 once the job got to step 150, 4 again once it got to step 300, whatever checkpoint it resumes from meanwhile), or
`4,2@60s,4@180s` (by seconds since the run began: an outage that does not wait for the job, to compare an elastic
job with one that is not). At most that many worker pods run at once; a worker pod created beyond them waits,
Pending, as the scheduler leaves a pod it cannot place (PodScheduled False, Unschedulable), and starts once a slot is
free. When the slots drop below the running workers, the last of them go as if their node were lost (killed, and
gone). An elastic job (workers.minReplicas) so shows its shrink on this machine: it waits the operator's
resizeWaitSeconds, goes on with the workers that run, and grows back at a checkpoint once the slots return (the
room the operator sees is the free slots)."""

import copy
import time
import uuid
from dataclasses import dataclass, field

from trainingjob.children.contract import ROLE_WORKER
from trainingjob.children.naming import ROLE_LABEL
from trainingjob.kube.ports import Manifest
from trainingjob.local.pod import now_stamp


def is_worker(manifest: Manifest) -> bool:
    return (manifest["metadata"].get("labels") or {}).get(ROLE_LABEL) == ROLE_WORKER


@dataclass(frozen=True)
class Capacity:
    """Worker slots over the run: (from, slots) entries, `from` increasing, in the job's steps or in seconds."""

    schedule: tuple[tuple[int, int], ...]
    seconds: bool = False  # `from` counts seconds since the run began, not the job's steps


def parse(text: str) -> Capacity:
    """`N`, `N,M@STEP,...` or `N,M@SECONDSs,...`; a ValueError that names the part it cannot read."""
    parts = text.split(",")
    seconds = any(part.endswith("s") for part in parts)  # every change at a second, or every one at a step
    schedule: list[tuple[int, int]] = []
    for i, part in enumerate(parts):
        slots, at, since = part.partition("@")
        start = since.removesuffix("s") if seconds else since
        if not slots.isdigit() or int(slots) < 1 or (i and not at):
            raise ValueError(f"{part!r}: expected N, N@STEP or N@SECONDSs, N at least 1 (e.g. 4,2@150,4@300)")
        if at and (not start.isdigit() or since.endswith("s") != seconds):
            raise ValueError(f"{part!r}: every change at a step (4,2@150) or every one at a second (4,2@60s)")
        step = int(start) if at else 0
        if schedule and step <= schedule[-1][0]:
            raise ValueError(f"{part!r}: the steps (or seconds) must increase")
        schedule.append((step, int(slots)))
    return Capacity(tuple(schedule), seconds=seconds)


@dataclass
class Waiting:
    """Worker pods created beyond the capacity, by name, in the order they were created."""

    capacity: Capacity
    step: int = 0  # the furthest step of the job, as its status said (a schedule by steps follows it)
    began: float = field(default_factory=time.monotonic)  # when the run began (a schedule in seconds counts from it)
    pods: dict[str, Manifest] = field(default_factory=dict)

    @property
    def slots(self) -> int:
        """The worker slots now: those of the last entry that began at or before the job's step (or this second)."""
        schedule = self.capacity.schedule
        now = int(time.monotonic() - self.began) if self.capacity.seconds else self.step
        return next((slots for since, slots in reversed(schedule) if since <= now), schedule[0][1])

    def spare(self, running_workers: int) -> int:
        """Free slots no waiting pod takes: the room for more workers."""
        return max(self.slots - running_workers - len(self.pods), 0)

    def hold(self, manifest: Manifest) -> str:
        """Keep a pod that has no slot: Pending and unschedulable, as the scheduler shows it. Its UID."""
        pod = copy.deepcopy(manifest)
        stamp = now_stamp()
        pod["metadata"].update(uid=str(uuid.uuid4()), creationTimestamp=stamp, namespace="local")
        message = f"0/1 nodes are available: local mode runs at most {self.slots} worker pods (--capacity)."
        scheduled = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
        pod["status"] = {"phase": "Pending", "conditions": [scheduled | {"lastTransitionTime": stamp}]}
        self.pods[pod["metadata"]["name"]] = pod
        return str(pod["metadata"]["uid"])

    def drop(self, name: str, uid: str) -> bool:
        """Delete a waiting pod (of this UID): it never ran, so it goes at once."""
        pod = self.pods.get(name)
        if pod is None or pod["metadata"]["uid"] != uid:
            return False
        del self.pods[name]
        return True

    def placeable(self, running_workers: int) -> list[Manifest]:
        """The waiting pods that now have a slot, oldest first, taken out of the waiting list."""
        free = max(self.slots - running_workers, 0)
        placed = list(self.pods)[:free]
        return [self.pods.pop(name) for name in placed]
