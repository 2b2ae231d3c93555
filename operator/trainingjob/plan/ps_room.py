"""A parameter-server job's workers.minReplicas: its workers train asynchronously, each replaced alone, so the job
trains with whichever workers run; minReplicas says how few may. Workers 0 to minReplicas-1 must run (worker 0
reports the job's progress and waits for the others at the end): each counts against the startup deadline as
usual. A worker from minReplicas on whose pod the scheduler cannot place (no node has room: a node gone, no spare
GPU) waits for room without a deadline and joins when the scheduler places it; a pod that is placed but does not
start (an image that does not pull, a volume that does not mount) still counts. The trainer knows minReplicas too
(TJ_MIN_WORKERS): worker 0 ends the job without the workers from it on that never came or went silent."""

from collections.abc import Sequence

from trainingjob.children.contract import ROLE_WORKER
from trainingjob.model import Mode
from trainingjob.plan.slots import Slot
from trainingjob.plan.types import Context


def waiting_for_room(ctx: Context, slots: Sequence[Slot]) -> frozenset[str]:
    """The worker slots beyond minReplicas whose pods wait for room, their startup deadline not counting."""
    workers = ctx.job.spec.workers
    if ctx.job.spec.mode != Mode.PARAMETER_SERVER or workers.min_replicas is None:
        return frozenset()
    return frozenset(
        s.name
        for s in slots
        if s.replica.role == ROLE_WORKER
        and s.replica.index >= workers.min_replicas
        and s.pod is not None
        and not s.pod.node
        and s.pod.unschedulable
    )
