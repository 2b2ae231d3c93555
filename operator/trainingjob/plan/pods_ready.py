"""PodsReady on a queued job's Kueue Workload, set as Kueue's own job reconciler sets it, so that Kueue's
waitForPodsReady can evict a job whose pods do not all come up within its timeout after admission (and requeue it
with a backoff), and recoveryTimeout one that lost a pod and does not recover. Pure.

    not admitted (or evicted)     false, WaitForStart (written only over a condition already there)
    every pod of the attempt up   true, Started (Recovered after a WaitForRecovery)
    not all up, never were        false, WaitForStart (not written where no condition is: Kueue reads none so)
    not all up, after they were   false, WaitForRecovery

A pod is up when it is Running and ready, or Succeeded. Written only when the status or reason changes: no write
per reconcile."""

from trainingjob.children.observe import PodPhase, PodState
from trainingjob.children.workload import (
    RECOVERED,
    STARTED,
    WAIT_FOR_RECOVERY,
    WAIT_FOR_START,
    Act,
    QueueState,
    WorkloadAction,
)
from trainingjob.model import TrainingJobStatus
from trainingjob.plan.types import Context


def _up(pod: PodState) -> bool:
    running = pod.phase == PodPhase.RUNNING and pod.ready and not pod.deleting
    return running or pod.phase == PodPhase.SUCCEEDED


def wanted(ctx: Context, status: TrainingJobStatus, state: QueueState) -> tuple[bool, str] | None:
    """PodsReady as (status, reason) the Workload should have now; None where it should keep what it has."""
    before = state.pods_ready
    if not state.admitted or state.evicted is not None:
        return (False, WAIT_FOR_START) if before is not None else None
    up = sum(1 for p in ctx.pods_of(status.current_pods_attempt) if _up(p))
    if up >= len(ctx.slots):
        return True, RECOVERED if before is not None and before[1] in (WAIT_FOR_RECOVERY, RECOVERED) else STARTED
    if before is None:
        return None  # Kueue reads no condition as WaitForStart, counted from the admission
    return (False, WAIT_FOR_RECOVERY) if before[0] or before[1] == WAIT_FOR_RECOVERY else (False, WAIT_FOR_START)


def action(ctx: Context, status: TrainingJobStatus, state: QueueState) -> WorkloadAction | None:
    """The PodsReady write, when the condition the Workload has is not the one it should have."""
    now = wanted(ctx, status, state)
    if now is None or now == state.pods_ready:
        return None
    ready, reason = now
    return WorkloadAction(Act.PODS_READY, succeeded=ready, reason=reason)
