"""Local mode's stand-in for a cluster short of room (`tjctl run --capacity N`, or `4,2@150,4@300`: 4 worker slots,
2 from the job's step 150, 4 again from step 300): at most that many worker pods run at once; a worker pod created
beyond them waits, Pending, as the scheduler leaves a pod it cannot place (PodScheduled False, Unschedulable), and
starts once a slot is free. When the slots drop below the running workers, the last of them go as if their node
were lost (killed, and gone). An elastic job (workers.minReplicas) so shows its shrink on this machine: it waits
the operator's resizeWaitSeconds, goes on with the workers that run, and grows back at a checkpoint once the slots
return (the room the operator sees is the free slots)."""

import copy
import uuid
from dataclasses import dataclass, field

from trainingjob.children.contract import ROLE_WORKER
from trainingjob.children.naming import ROLE_LABEL
from trainingjob.kube.ports import Manifest
from trainingjob.local.pod import now_stamp


def is_worker(manifest: Manifest) -> bool:
    return (manifest["metadata"].get("labels") or {}).get(ROLE_LABEL) == ROLE_WORKER


@dataclass
class Waiting:
    """Worker pods created beyond the capacity, by name, in the order they were created."""

    schedule: tuple[tuple[int, int], ...]  # (from step, worker slots), by step
    step: int = 0  # the job's step, as its status last said
    pods: dict[str, Manifest] = field(default_factory=dict)

    @property
    def slots(self) -> int:
        """The worker slots at the job's step: those of the last entry that began at or before it."""
        return next((slots for since, slots in reversed(self.schedule) if since <= self.step), self.schedule[0][1])

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
