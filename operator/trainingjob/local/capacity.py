"""Local mode's stand-in for a cluster short of room (`tjctl run --capacity N`): at most N worker pods run at once;
a worker pod created beyond them waits, Pending, as the scheduler leaves a pod it cannot place (PodScheduled False,
Unschedulable), and starts once a slot is free. An elastic job (workers.minReplicas) so shows its shrink on this
machine: it waits the operator's resizeWaitSeconds, then goes on with the workers that run."""

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

    slots: int
    pods: dict[str, Manifest] = field(default_factory=dict)

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
