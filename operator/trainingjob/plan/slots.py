"""The current attempt slot by slot: which replicas have a pod that is up, which wait and why, and since
when the startup deadline counts for each. Shared by the startup deadline, pod creation and the phase."""

from dataclasses import dataclass
from datetime import datetime

from trainingjob.children.naming import Replica
from trainingjob.children.observe import PodPhase, PodState
from trainingjob.model import ConditionStatus, ConditionType, TrainingJobStatus
from trainingjob.plan import tracking
from trainingjob.plan.transitions import condition_of
from trainingjob.plan.types import Context

REFUSED = "PodCreateRefused"
NAME_IN_USE = "PodNameInUse"


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
    pods = {p.name: p for p in ctx.pods_of(status.current_pods_attempt)}
    succeeded = tracking.succeeded_names(status)
    result = []
    for replica in ctx.slots:
        name = replica.pod_name(ctx.name, status.current_pods_attempt)
        pod = pods.get(name)
        done = name in succeeded or (pod is not None and pod.phase == PodPhase.SUCCEEDED)
        result.append(Slot(replica, name, pod, done))
    return result


def refusal_since(status: TrainingJobStatus) -> datetime | None:
    """When the current run of refused creations began, if creations are being refused now."""
    created = condition_of(status, ConditionType.CREATED)
    if created is None or created.status != ConditionStatus.FALSE or created.reason not in (REFUSED, NAME_IN_USE):
        return None
    return created.last_transition_time


def waiting_since(slot: Slot, status: TrainingJobStatus) -> datetime | None:
    """Since when this slot counts against startupDeadlineSeconds; None while the wait is the operator's own."""
    if slot.is_up:
        return None
    if slot.pod is not None:  # a pod that ended or is going is the failure policy's, not a slow start
        return None if slot.pod.deleting or slot.pod.is_finished or slot.pod.has_failed else slot.pod.created
    return refusal_since(status)


def why(slot: Slot, status: TrainingJobStatus, foreign: tuple[str, ...]) -> str:
    """Why a slot is not up, in a few words from the kubelet, the scheduler or the apiserver."""
    pod = slot.pod
    if pod is not None:
        if pod.deleting:
            return "being replaced"
        return pod.unschedulable or pod.waiting or pod.reason or pod.phase.value
    if slot.name in foreign:
        return "a pod of this name belongs to another object (a deleted job of the same name?); waiting for it to go"
    created = condition_of(status, ConditionType.CREATED)
    if refusal_since(status) is not None and created is not None:
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
