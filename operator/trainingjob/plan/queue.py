"""Kueue, as its job frameworks integrate: a job with scheduling.queueName runs only while Kueue admits its
Workload. Pure: decided from the Workload as read once this reconcile (ctx.observed.queue; None where no Kueue is
consulted, as on this machine in local mode, and then the queue name changes nothing).

    waiting     no pods are made until the Workload is admitted; the job stays Pending with the condition Queued
                naming the LocalQueue and Kueue's reason; no deadline counts the wait (the startup deadline counts
                from a pod's creation)
    admitted    Queued turns false; pods are made, each role placed by its flavors (node labels, tolerations)
    evicted     (preempted, or any eviction) the job is suspended as spec.suspend suspends it: its pods get
                SIGTERM and checkpoint; once none holds its node the quota reservation is released, and the job
                waits to be admitted again, then resumes from its checkpoint in a new attempt
    ended       the Workload is marked Finished, which frees the quota

The policy itself runs inside suspend.decide (a hold is a suspension Kueue asks for); `action` decides the one
write on the Workload a reconcile makes, from the status the plan leaves."""

from dataclasses import dataclass
from typing import Any

from trainingjob.children.workload import Act, Placement, QueueState, WorkloadAction
from trainingjob.model import ConditionType, Phase, TrainingJobStatus
from trainingjob.plan.transitions import condition_of, with_condition
from trainingjob.plan.types import Context

# The operator does not watch Workloads: a held job reads its own again this often (to start soon once admitted),
# an admitted one this often (to stop soon once evicted: the job preempting it waits for its quota).
POLL_SECONDS = 5.0
ADMITTED_POLL_SECONDS = 15.0
ADMITTED = "Admitted"


@dataclass(frozen=True)
class Hold:
    """Why Kueue holds the job now: a CamelCase reason and a sentence."""

    reason: str
    message: str


def queue_name(ctx: Context) -> str | None:
    scheduling = ctx.job.spec.scheduling
    return scheduling.queue_name if scheduling else None


def _state(ctx: Context) -> QueueState | None:
    return ctx.observed.queue if queue_name(ctx) else None


def hold(ctx: Context, status: TrainingJobStatus) -> Hold | None:
    """Why Kueue holds the job, or None when it does not (not queued, admitted, or finished)."""
    state, name = _state(ctx), queue_name(ctx)
    if state is None or status.phase.is_terminal:
        return None
    where = f"LocalQueue {name}"
    if not state.served:
        return Hold("KueueNotInstalled", f"The job waits for {where}, but this cluster serves no Kueue Workloads.")
    if state.evicted is not None:
        reason, message = state.evicted
        said = f": {message}" if message else ""
        return Hold(reason or "Evicted", f"Kueue evicted the job{said}. It waits in {where} to be admitted again.")
    if state.finished:
        return Hold("WorkloadFinished", "Kueue ended the job's Workload; the job makes no pods.")
    if state.admitted:
        return None
    said = f": {state.waiting}" if state.waiting else "."
    return Hold("WaitingForQuota", f"Waiting in {where} for Kueue to admit the job{said}")


def marked(ctx: Context, status: TrainingJobStatus, held: Hold | None) -> TrainingJobStatus:
    """The condition Queued: true with the hold's reason while Kueue holds the job, false once it is admitted."""
    state = _state(ctx)
    if state is None or status.phase.is_terminal:
        return status
    if held is not None:
        return with_condition(ctx, status, ConditionType.QUEUED, True, reason=held.reason, message=held.message)
    if condition_of(status, ConditionType.QUEUED) is None and not state.admitted:
        return status
    where = f"ClusterQueue {state.cluster_queue}" if state.cluster_queue else "Kueue"
    message = f"Admitted by {where}."
    return with_condition(ctx, status, ConditionType.QUEUED, False, reason=ADMITTED, message=message)


def polled(ctx: Context, status: TrainingJobStatus) -> float | None:
    """When an admitted job reads its Workload again; None for a job Kueue does not manage, or one that ended."""
    return ADMITTED_POLL_SECONDS if _state(ctx) is not None and not status.phase.is_terminal else None


def waiting_first(ctx: Context, status: TrainingJobStatus) -> bool:
    """Held before it ever had pods (rather than evicted while it had them): the job stays Pending."""
    return status.phase == Phase.PENDING and not ctx.observed.pods


def placement(ctx: Context, role: str) -> Placement | None:
    state = _state(ctx)
    return state.placements.get(role) if state is not None and state.admitted else None


def placed(manifest: dict[str, Any], where: Placement | None) -> dict[str, Any]:
    """A pod placed where its admission put its role: the flavors' node labels added to its nodeSelector (they
    win), their tolerations added to its own."""
    if where is None or not (where.node_selector or where.tolerations):
        return manifest
    spec = dict(manifest["spec"])
    if where.node_selector:
        spec["nodeSelector"] = {**spec.get("nodeSelector", {}), **where.node_selector}
    own = list(spec.get("tolerations", []))
    if extra := [t for t in where.tolerations if t not in own]:
        spec["tolerations"] = own + extra
    return {**manifest, "spec": spec}


def action(ctx: Context, status: TrainingJobStatus) -> WorkloadAction | None:
    """Create the Workload of a queued job that has none; release an evicted one's quota once no pod holds its
    node; mark it Finished once the job ended."""
    state = _state(ctx)
    if state is None or not state.served:
        return None
    if status.phase.is_terminal:
        if not state.exists or state.finished:
            return None
        ended = condition_of(
            status, ConditionType.SUCCEEDED if status.phase == Phase.SUCCEEDED else ConditionType.FAILED
        )
        return WorkloadAction(Act.FINISH, status.phase == Phase.SUCCEEDED, ended.message if ended else "")
    if not state.exists:
        return WorkloadAction(Act.CREATE)
    if state.evicted is not None and state.reserved and not any(p.holds_its_node for p in ctx.observed.pods):
        return WorkloadAction(Act.RELEASE)
    return None
