"""The current attempt slot by slot: which replicas have a pod that is up, which wait and why, and since
when the startup deadline counts for each. Shared by the startup deadline, pod creation and the phase."""

from dataclasses import dataclass
from datetime import datetime

from trainingjob.children.naming import Replica
from trainingjob.children.observe import PodPhase, PodState
from trainingjob.model import ConditionStatus, ConditionType, NodeRefusal, TrainingJobStatus
from trainingjob.plan import gates, prepared, tracking
from trainingjob.plan.transitions import condition_of
from trainingjob.plan.types import Context

REFUSED = "PodCreateRefused"
NAME_IN_USE = "PodNameInUse"
STUCK = "PodsStuckTerminating"  # a pod the next creation waits for does not go (plan/terminating.py)


@dataclass(frozen=True)
class Slot:
    """One replica in the current attempt."""

    replica: Replica
    name: str
    pod: PodState | None
    done: bool  # its pod succeeded (seen now, or recorded before it went)

    @property
    def is_up(self) -> bool:
        return self.done or (self.pod is not None and self.pod.is_up)

    @property
    def is_missing(self) -> bool:
        return self.pod is None and not self.done


def slots(ctx: Context, status: TrainingJobStatus) -> list[Slot]:
    """The slots of the status's current attempt; laid out once a pass for each attempt and set of finished pods
    (what they depend on in the status), since several policies ask."""
    attempt, succeeded = status.current_pods_attempt, frozenset(tracking.succeeded_names(status))
    key = (slots, attempt, succeeded)
    laid_out: tuple[Slot, ...] | None = ctx.memo.get(key)
    if laid_out is None:
        laid_out = ctx.memo[key] = tuple(_laid_out(ctx, attempt, succeeded))
    return list(laid_out)


def _laid_out(ctx: Context, attempt: int, succeeded: frozenset[str]) -> list[Slot]:
    pods = {p.name: p for p in ctx.pods_of(attempt)}
    result = []
    for replica in ctx.slots:
        name = replica.pod_name(ctx.name, attempt)
        pod = pods.get(name)
        done = name in succeeded or (pod is not None and pod.phase == PodPhase.SUCCEEDED)
        result.append(Slot(replica, name, pod, done))
    return result


def _created_waits(status: TrainingJobStatus, *reasons: str) -> datetime | None:
    created = condition_of(status, ConditionType.CREATED)
    if created is None or created.status != ConditionStatus.FALSE or created.reason not in reasons:
        return None
    return created.last_transition_time


def refusal_since(status: TrainingJobStatus, stuck_from: datetime | None = None) -> datetime | None:
    """When the current run of refused creations (of pods, or of the objects they need) began, or of waiting for a
    pod that does not go (`stuck_from`: when the first pod waited for became stuck), if that is what holds the
    creations up now. Created's lastTransitionTime cannot say it: the condition may have been False for another
    reason long before."""
    stuck = stuck_from if _created_waits(status, STUCK) is not None else None
    moments = [_created_waits(status, REFUSED, NAME_IN_USE), prepared.refusal_since(status), stuck]
    return min((m for m in moments if m is not None), default=None)


def refusal_of(status: TrainingJobStatus, slot: Slot) -> NodeRefusal | None:
    """The refusals of the slot's pods by nodes, while none of them has run since (plan/refused.py)."""
    return next((r.refused for r in status.replacements if r.pod == slot.name), None)


def waiting_since(slot: Slot, status: TrainingJobStatus, stuck_from: datetime | None = None) -> datetime | None:
    """Since when this slot counts against startupDeadlineSeconds (from a node's first refusal of its pod, across
    the pod's re-creations); None while the wait is the operator's own."""
    if slot.is_up:
        return None
    refusal, since = refusal_of(status, slot), _waiting_since(slot, status, stuck_from)
    if refusal is None:
        return since
    return refusal.since if since is None else min(refusal.since, since)


def _waiting_since(slot: Slot, status: TrainingJobStatus, stuck_from: datetime | None) -> datetime | None:
    if slot.pod is not None:  # a pod that ended or is going is the failure policy's, not a slow start
        if slot.pod.deleting:  # unless it does not go
            return stuck_from if _created_waits(status, STUCK) is not None else None
        if slot.pod.is_finished or slot.pod.has_failed or slot.pod.held_by:  # held: another controller's wait
            return None
        created, lifted = slot.pod.created, gates.lifted_at(status)
        return max(created, lifted) if created is not None and lifted is not None else created
    return refusal_since(status, stuck_from)


def why(slot: Slot, status: TrainingJobStatus, foreign: tuple[str, ...]) -> str:
    """Why a slot is not up, in a few words from the kubelet, the scheduler or the apiserver (and the nodes that
    refused its pods)."""
    refusal = refusal_of(status, slot)
    if refusal is None:
        return _why(slot, status, foreign)
    node, at = refusal.node or "(unknown)", refusal.since.isoformat().replace("+00:00", "Z")
    times = "once" if refusal.count == 1 else f"{refusal.count} times"
    said = f"refused by node {node} ({refusal.reason}), {times} since {at}"
    if slot.pod is not None and not slot.pod.is_finished and not slot.pod.deleting:
        return f"{_why(slot, status, foreign)}; {said}"
    backoff = next(r for r in status.replacements if r.pod == slot.name)
    return f"{said}; created again not before {backoff.not_before.isoformat().replace('+00:00', 'Z')}"


def _why(slot: Slot, status: TrainingJobStatus, foreign: tuple[str, ...]) -> str:
    pod = slot.pod
    if pod is not None:
        if pod.deleting:
            stuck = _stuck_message(status)
            return f"being replaced; {stuck}" if stuck else "being replaced"
        held = f"waits for scheduling gate {pod.held_by[0]}, another controller's" if pod.held_by else ""
        return held or pod.unschedulable or pod.waiting or pod.reason or pod.phase.value
    if slot.name in foreign:
        return "a pod of this name belongs to another object (a deleted job of the same name?); waiting for it to go"
    return _not_created(slot, status)


def _stuck_message(status: TrainingJobStatus) -> str:
    created = condition_of(status, ConditionType.CREATED)
    return created.message if created is not None and _created_waits(status, STUCK) else ""


def _not_created(slot: Slot, status: TrainingJobStatus) -> str:
    """Why the operator has not created a missing pod: what its creation waits for, or what the apiserver said."""
    held, created = prepared.refused_now(status), condition_of(status, ConditionType.CREATED)
    if held is not None:
        return f"not created: {held.message}"
    if created is not None and _created_waits(status, STUCK):
        return created.message
    if created is not None and _created_waits(status, REFUSED, NAME_IN_USE):
        return f"creation refused: {created.message}"
    backoff = next((r for r in status.replacements if r.pod == slot.name), None)
    if backoff is not None:
        return f"replaced alone, not before {backoff.not_before.isoformat().replace('+00:00', 'Z')} (its own backoff)"
    return "not created yet"


def summary(waiting: list[Slot], status: TrainingJobStatus, foreign: tuple[str, ...], shown: int = 3) -> str:
    """ "pod a: why; pod b: why and N more", the first few waiting slots."""
    parts = [f"{s.name}: {why(s, status, foreign)}" for s in waiting[:shown]]
    more = f" and {len(waiting) - shown} more" if len(waiting) > shown else ""
    return "; ".join(parts) + more
