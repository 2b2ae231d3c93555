"""The objects a job's pods need, before any pod is created: its Service (the ranks find each other through it), its
key Secret (every pod mounts it) and its NetworkPolicy (when on). The reconcile sends them first and creates no pod
while the apiserver refuses one; what they met is recorded here (pure) in the Prepared condition: False with the
refused object and the apiserver's words (retried with a growing delay, counted by the startup deadline, announced
once per cause), True once every one was created or found; from then on they are not sent again (created())."""

from collections.abc import Sequence
from datetime import datetime, timedelta

from trainingjob.model import Condition, ConditionStatus, ConditionType, TrainingJobStatus
from trainingjob.plan.conditions import set_condition
from trainingjob.plan.types import Event, Refusal

REFUSED_SUFFIX = "CreateRefused"  # SecretCreateRefused, ServiceCreateRefused, NetworkPolicyCreateRefused
READY = "ObjectsCreated"
READY_MESSAGE = "The job's Service, key Secret and NetworkPolicy (when on) exist."
MESSAGE_LENGTH = 4096


def prepared_condition(status: TrainingJobStatus) -> Condition | None:
    return next((c for c in status.conditions if c.type == ConditionType.PREPARED), None)


def created(status: TrainingJobStatus) -> bool:
    """Whether the key Secret and NetworkPolicy were created (or found) for this job: later waves do not send them
    again. A namespace at its quota of Secrets, or under a policy refusing their creation, refuses a create even of a
    name that exists (admission runs before the apiserver finds the name taken), so sending them with every wave
    would hold every restart and replacement of a job whose objects exist. (The Service is the informer's to see.)"""
    found = prepared_condition(status)
    return found is not None and found.status == ConditionStatus.TRUE


def refused_now(status: TrainingJobStatus) -> Condition | None:
    """The Prepared condition when it says an object the pods need is refused."""
    found = prepared_condition(status)
    refused = found is not None and found.status == ConditionStatus.FALSE and found.reason.endswith(REFUSED_SUFFIX)
    return found if refused else None


def refusal_since(status: TrainingJobStatus) -> datetime | None:
    """Since when the objects the pods need have been refused (the startup deadline counts from then)."""
    found = refused_now(status)
    return found.last_transition_time if found is not None else None


def retry_at(condition: Condition, base: float, most: float) -> datetime | None:
    """When a refused creation recorded in `condition` is tried again: after as long as the refusals have lasted,
    at least `base` and at most `most` seconds after the last one."""
    if condition.last_probe_time is None:
        return None
    tried = (condition.last_probe_time - condition.last_transition_time).total_seconds()
    return condition.last_probe_time + timedelta(seconds=min(max(tried, base), most))


def recorded(
    status: TrainingJobStatus, refusals: Sequence[Refusal], now: datetime, generation: int | None
) -> tuple[TrainingJobStatus, Event | None]:
    """The status once the objects the pods need were sent: Prepared False naming the first refused one, or True.
    A Warning Event when the cause (the refused kind) is new, not on every retry that meets it again."""
    if not refusals:
        conditions = set_condition(
            status.conditions, ConditionType.PREPARED, True, READY, READY_MESSAGE, now=now, generation=generation
        )
        return status.model_copy(update={"conditions": conditions}), None
    first = refusals[0]
    reason = f"{first.kind}{REFUSED_SUFFIX}"
    message = (
        f"Creating {first.kind} {first.name} was refused ({first.code}): {first.message.rstrip('. ')}; "
        "no pod of the job is created until it exists."
    )[:MESSAGE_LENGTH]
    conditions = set_condition(
        status.conditions, ConditionType.PREPARED, False, reason, message, now=now, generation=generation, probed=now
    )
    after = status.model_copy(update={"conditions": conditions})
    before = refused_now(status)
    if before is not None and before.reason == reason:
        return after, None
    return after, Event("Warning", reason, message[:1024])
