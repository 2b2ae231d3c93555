"""Pods another controller holds at a scheduling gate of its own (Kueue's pod integration, a quota or placement
webhook): the wait is that controller's to end, not a slow start. Pure: while a pod of the current attempt is held,
the condition Queued is true naming the pod and the gate; once none is, false (SchedulingGatesLifted), and its
transition is when the startup deadline starts counting for the pods that were held (slots.waiting_since). A job
with scheduling.queueName keeps Queued for Kueue's Workload (queue.py); its held pods do not count either."""

from datetime import datetime

from trainingjob.children.observe import PodState
from trainingjob.model import ConditionStatus, ConditionType, TrainingJobStatus
from trainingjob.plan.transitions import condition_of, with_condition
from trainingjob.plan.types import Context, Decision

HELD = "HeldBySchedulingGate"
LIFTED = "SchedulingGatesLifted"
LIFTED_MESSAGE = "No pod is held by another controller's scheduling gate; the startup deadline counts from now."


def held(ctx: Context, status: TrainingJobStatus) -> list[PodState]:
    """The current attempt's pods another controller's scheduling gate holds."""
    return [p for p in ctx.observed.pods if p.held_by and p.attempt == status.current_pods_attempt and not p.deleting]


def decide(ctx: Context, status: TrainingJobStatus) -> Decision | None:
    """Queued true while a pod is held (naming the first and its gate), false once the gates are lifted."""
    if ctx.observed.queue is not None or status.phase.is_terminal:
        return None
    pods = held(ctx, status)
    if pods:
        first, more = pods[0], f" and {len(pods) - 1} more" if len(pods) > 1 else ""
        message = (
            f"Pod {first.name}{more} waits for scheduling gate {first.held_by[0]}, another controller's (a queue or "
            "an admission webhook); the time held does not count against startupDeadlineSeconds."
        )
        return Decision(with_condition(ctx, status, ConditionType.QUEUED, True, reason=HELD, message=message))
    found = condition_of(status, ConditionType.QUEUED)
    if found is None or found.reason != HELD or found.status != ConditionStatus.TRUE:
        return None
    return Decision(with_condition(ctx, status, ConditionType.QUEUED, False, reason=LIFTED, message=LIFTED_MESSAGE))


def lifted_at(status: TrainingJobStatus) -> datetime | None:
    """When the operator saw the last held pod released: the startup deadline of the pods held counts from then."""
    found = condition_of(status, ConditionType.QUEUED)
    if found is None or found.status != ConditionStatus.FALSE or found.reason != LIFTED:
        return None
    return found.last_transition_time
