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
    suspended   (spec.suspend) the Workload is deactivated (spec.active false): Kueue evicts it and its quota is
                released once the pods are gone, as for any eviction; resumed, it is activated (Queued says
                Activating until the Workload is read back active) and queues again
    moved       a changed scheduling.queueName moves the Workload to that LocalQueue while it reserves no quota;
                an admitted one stays where it was admitted (Kueue moves no admitted Workload), and the condition
                Queued says so, until it is queued again (evicted, suspended)
    unqueued    scheduling.queueName removed: the Workload is deleted (freeing any quota) and the job runs as one
                that never named a queue; the condition Queued turns false (Unqueued)
    pods ready  PodsReady on the Workload follows the attempt's pods, for Kueue's waitForPodsReady (pods_ready.py)

The policy itself runs inside suspend.decide (a hold is a suspension Kueue asks for); `action` decides the one
write on the Workload a reconcile makes, from the status the plan leaves."""

from dataclasses import dataclass
from typing import Any

from trainingjob.children.workload import DEACTIVATED, Act, Placement, QueueState, WorkloadAction
from trainingjob.model import ConditionType, Phase, TrainingJob, TrainingJobStatus
from trainingjob.plan import pods_ready
from trainingjob.plan.transitions import condition_of, with_condition
from trainingjob.plan.types import Context

# The operator does not watch Workloads: a held job reads its own again this often (to start soon once admitted),
# an admitted one this often (to stop soon once evicted: the job preempting it waits for its quota).
POLL_SECONDS = 5.0
ADMITTED_POLL_SECONDS = 15.0
ADMITTED = "Admitted"
UNQUEUING, UNQUEUED = "Unqueuing", "Unqueued"  # the Queued reasons of a job whose queueName was removed


@dataclass(frozen=True)
class Hold:
    """Why Kueue holds the job now: a CamelCase reason and a sentence."""

    reason: str
    message: str


def named(job: TrainingJob) -> str | None:
    scheduling = job.spec.scheduling
    return scheduling.queue_name if scheduling else None


def queue_name(ctx: Context) -> str | None:
    return named(ctx.job)


def consulted(job: TrainingJob) -> bool:
    """Whether a reconcile reads the job's Workload: it names a queue, or named one and its Workload may remain."""
    queued = condition_of(job.status, ConditionType.QUEUED) if job.status else None
    return named(job) is not None or (queued is not None and queued.reason != UNQUEUED)


def _state(ctx: Context) -> QueueState | None:
    return ctx.observed.queue if queue_name(ctx) else None


def hold(ctx: Context, status: TrainingJobStatus) -> Hold | None:
    """Why Kueue holds the job, or None when it does not (not queued, admitted, or finished)."""
    state = _state(ctx)
    if state is None or status.phase.is_terminal:
        return None
    return _held(state, f"LocalQueue {queue_name(ctx)}", suspended=ctx.job.spec.run_policy.suspend)


def _held(state: QueueState, where: str, *, suspended: bool) -> Hold | None:
    if not state.served:
        return Hold("KueueNotInstalled", f"The job waits for {where}, but this cluster serves no Kueue Workloads.")
    if not state.active:
        return _inactive(where, suspended=suspended)
    if state.evicted is not None and state.evicted[0] != DEACTIVATED:
        reason, message = state.evicted
        said = f": {message}" if message else ""
        return Hold(reason or "Evicted", f"Kueue evicted the job{said}. It waits in {where} to be admitted again.")
    if state.finished:
        return Hold("WorkloadFinished", "Kueue ended the job's Workload; the job makes no pods.")
    if state.admitted and state.evicted is None:
        return None
    said = f": {state.waiting}" if state.waiting and state.evicted is None else "."
    return Hold("WaitingForQuota", f"Waiting in {where} for Kueue to admit the job{said}")


def _inactive(where: str, *, suspended: bool) -> Hold:
    """A deactivated Workload: the job is suspended, or was resumed and this reconcile activates it (it waits for
    quota once its Workload is read back active)."""
    if suspended:
        return Hold("Suspended", f"The job is suspended: its Workload in {where} is deactivated, its quota given back.")
    return Hold("Activating", f"The job was resumed: its Workload in {where} is being activated to queue again.")


def marked(ctx: Context, status: TrainingJobStatus, held: Hold | None) -> TrainingJobStatus:
    """The condition Queued: true with the hold's reason while Kueue holds the job, false once it is admitted (or
    once it names no queue)."""
    if (left := _left(ctx)) is not None and not status.phase.is_terminal:
        return _unqueued(ctx, status, left)
    state = _state(ctx)
    if state is None or status.phase.is_terminal:
        return status
    if held is not None:
        return with_condition(ctx, status, ConditionType.QUEUED, True, reason=held.reason, message=held.message)
    if condition_of(status, ConditionType.QUEUED) is None and not state.admitted:
        return status
    where = f"ClusterQueue {state.cluster_queue}" if state.cluster_queue else "Kueue"
    message = f"Admitted by {where}."
    if state.queue and state.queue != queue_name(ctx):
        message += (
            f" scheduling.queueName now names {queue_name(ctx)}, but Kueue moves no admitted Workload: the job"
            f" stays in LocalQueue {state.queue} until it is queued again (evicted or suspended)."
        )
    return with_condition(ctx, status, ConditionType.QUEUED, False, reason=ADMITTED, message=message)


def _left(ctx: Context) -> QueueState | None:
    """The Workload of a job that named a queue (its status says Queued) and names none now."""
    return ctx.observed.queue if queue_name(ctx) is None and consulted(ctx.job) else None


def _unqueued(ctx: Context, status: TrainingJobStatus, state: QueueState) -> TrainingJobStatus:
    if state.exists:
        reason, message = UNQUEUING, "scheduling.queueName was removed: the job's Kueue Workload is being deleted."
    else:
        reason, message = UNQUEUED, "scheduling.queueName was removed: the job runs without Kueue."
    return with_condition(ctx, status, ConditionType.QUEUED, False, reason=reason, message=message)


def settling(ctx: Context) -> bool:
    """A suspended job whose Workload still needs a write (deactivated, its quota released): it reads it again."""
    state = _state(ctx)
    return state is not None and state.served and state.exists and (state.active or state.reserved)


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
    """The one write on the Workload this reconcile: delete it once the job names no queue; create a queued job's;
    mark it Finished once the job ended; else its spec brought in line with the job's (change), else PodsReady."""
    if queue_name(ctx) is None:
        left = _left(ctx)
        return WorkloadAction(Act.LEAVE) if left is not None and left.exists else None
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
    return change(ctx, state) or pods_ready.action(ctx, status, state)


def change(ctx: Context, state: QueueState) -> WorkloadAction | None:
    """Deactivated while the job is suspended, activated once resumed; an evicted one's quota released once no
    pod holds its node; moved to the job's queue while it reserves none."""
    suspended = ctx.job.spec.run_policy.suspend
    if suspended == state.active:
        return WorkloadAction(Act.DEACTIVATE if suspended else Act.ACTIVATE)
    if state.evicted is not None and state.reserved and not any(p.holds_its_node for p in ctx.observed.pods):
        return WorkloadAction(Act.RELEASE)
    if state.queue != queue_name(ctx) and not state.reserved:
        return WorkloadAction(Act.MOVE)
    return None
