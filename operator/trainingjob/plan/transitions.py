"""Pure status transitions every policy shares: set a condition, move to a phase (with the conditions that
mirror it and the Event that announces it), and time arithmetic."""

from datetime import datetime, timedelta

from trainingjob.model import Condition, ConditionStatus, ConditionType, Phase, TrainingJobStatus
from trainingjob.plan.conditions import set_condition
from trainingjob.plan.types import Context, Event

PHASE_CONDITIONS = {
    Phase.RUNNING: ConditionType.RUNNING,
    Phase.RESTARTING: ConditionType.RESTARTING,
    Phase.SUSPENDED: ConditionType.SUSPENDED,
    Phase.SUCCEEDED: ConditionType.SUCCEEDED,
    Phase.FAILED: ConditionType.FAILED,
}
MESSAGE_LENGTH = 4096


def condition_of(status: TrainingJobStatus, kind: ConditionType) -> Condition | None:
    return next((c for c in status.conditions if c.type == kind), None)


def holds(status: TrainingJobStatus, kind: ConditionType) -> bool:
    found = condition_of(status, kind)
    return found is not None and found.status == ConditionStatus.TRUE


def with_condition(
    ctx: Context,
    status: TrainingJobStatus,
    kind: ConditionType,
    is_true: bool,
    *,
    reason: str,
    message: str,
) -> TrainingJobStatus:
    conditions = set_condition(
        status.conditions,
        kind,
        is_true,
        reason,
        message[:MESSAGE_LENGTH],
        now=ctx.now,
        generation=ctx.generation,
    )
    return status.model_copy(update={"conditions": conditions})


def moved(
    ctx: Context, status: TrainingJobStatus, phase: Phase, reason: str, message: str
) -> tuple[TrainingJobStatus, tuple[Event, ...]]:
    """The status in `phase`, its mirroring condition true and the others false; an Event when it changed."""
    events: tuple[Event, ...] = ()
    if status.phase != phase:
        kind = "Warning" if phase in (Phase.FAILED, Phase.RESTARTING) else "Normal"
        events = (Event(kind, reason, message[:MESSAGE_LENGTH]),)
    present = {c.type for c in status.conditions}
    for candidate, kind_of in PHASE_CONDITIONS.items():
        if candidate == phase or kind_of in present:
            status = with_condition(ctx, status, kind_of, candidate == phase, reason=reason, message=message)
    update: dict[str, object] = {"phase": phase}
    if phase.is_terminal and status.completion_time is None:
        update["completion_time"] = ctx.now
    return status.model_copy(update=update), events


def seconds_until(ctx: Context, moment: datetime, at_most: float) -> float:
    """Seconds from now until `moment`, never more than `at_most` (a clock set back must not stall a job)."""
    return min((moment - ctx.now).total_seconds(), at_most)


def after(moment: datetime, seconds: float) -> datetime:
    return moment + timedelta(seconds=seconds)
