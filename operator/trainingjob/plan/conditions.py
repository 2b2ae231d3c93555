"""Pure condition bookkeeping: set one condition, keeping its transition time unless its status changes."""

from datetime import datetime

from trainingjob.model import Condition, ConditionStatus, ConditionType


def set_condition(
    conditions: list[Condition],
    kind: ConditionType,
    is_true: bool,
    reason: str,
    message: str,
    *,
    now: datetime,
    generation: int | None,
    probed: datetime | None = None,
) -> list[Condition]:
    """A new list with `kind` set; lastTransitionTime moves only when the status flips."""
    status = ConditionStatus.TRUE if is_true else ConditionStatus.FALSE
    old = next((c for c in conditions if c.type == kind), None)
    since = old.last_transition_time if old is not None and old.status == status else now
    new = Condition(
        type=kind,
        status=status,
        reason=reason,
        message=message,
        last_transition_time=since,
        last_probe_time=probed,
        observed_generation=generation,
    )
    others = [c for c in conditions if c.type != kind]
    return sorted([*others, new], key=lambda c: list(ConditionType).index(c.type))


def is_true(conditions: list[Condition], kind: ConditionType) -> bool:
    return any(c.type == kind and c.status == ConditionStatus.TRUE for c in conditions)
