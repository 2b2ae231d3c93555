"""After the actions, pure: a large gang is created in waves that double in size (16, 32, 64... pods; a refusal
ends them, so a quota refuses a few creates, not a thousand), and the status then records what the waves did in
one write: the pods created (by UID) and the refusals (in the Created condition, or in Prepared for the objects
the pods need; the startup deadline counts both). The pods need no record before they run: the tracking finalizer
they are created with keeps each until the status says how it ended (plan/release.py)."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from trainingjob.model import ConditionType, TrainingJobStatus
from trainingjob.plan import history, prepared, tracking
from trainingjob.plan.conditions import set_condition
from trainingjob.plan.creation import CREATED, INVALID
from trainingjob.plan.slots import REFUSED
from trainingjob.plan.types import Event, Refusal

__all__ = ["FIRST_WAVE", "AfterWave", "Refusal", "after_wave", "refused", "waves"]
T = TypeVar("T")
FIRST_WAVE = 16  # pods in the first wave; each wave after is twice the last


@dataclass(frozen=True)
class AfterWave:
    """The status once a wave is recorded, and the Event that says a creation was refused (when the Created
    condition changed: a refusal that repeats pass after pass is announced once)."""

    status: TrainingJobStatus
    event: Event | None = None


def waves(items: Sequence[T], first: int = FIRST_WAVE) -> list[list[T]]:
    """`items` in order, in waves of first, 2 x first, 4 x first... items; the last wave takes whatever is left
    when that is less than twice the wave before it (1,024 in waves of 16: 16, 32, 64, 128, 256, 528)."""
    result: list[list[T]] = []
    start, size = 0, max(first, 1)
    while start < len(items):
        end = len(items) if len(items) - start < 2 * size else start + size
        result.append(list(items[start:end]))
        start, size = end, 2 * size
    return result


def after_wave(
    status: TrainingJobStatus,
    created: Mapping[str, str],
    refusals: Sequence[Refusal],
    now: datetime,
    generation: int | None,
    *,
    prepared_sent: bool = False,
    all_created: str | None = None,
) -> AfterWave:
    """What the waves did, recorded: the pods they created (name -> UID) tracked (the history notes the attempt's pods
    as created now), its pods' refusals in the Created condition and, when it sent the objects the pods need
    (`prepared_sent`), their outcome in the Prepared condition (plan/prepared.py). When the waves were to create
    every pod the attempt missed and nothing was refused, Created turns true with `all_created`, as the next pass
    would say it."""
    pods = [r for r in refusals if r.kind == "Pod"]
    others = [r for r in refusals if r.kind != "Pod"]
    after = history.record(status, refused(tracking.created(status, created), pods, now, generation), now)
    if all_created is not None and not refusals and all(created.values()):  # (no UID: found, maybe a namesake's)
        conditions = set_condition(
            after.conditions, ConditionType.CREATED, True, CREATED, all_created, now=now, generation=generation
        )
        after = after.model_copy(update={"conditions": conditions})
    if prepared_sent or others:
        after, event = prepared.recorded(after, others, now, generation)
        if event is not None:
            return AfterWave(after, event)
    if not pods or _created_says(status) == _created_says(after):
        return AfterWave(after)
    first = pods[0]
    message = f"Creating pod {first.name} was refused ({first.code}): {first.message}"[:1024]
    return AfterWave(after, Event("Warning", "PodCreateRefused", message))


def _created_says(status: TrainingJobStatus) -> str:
    created = next((c for c in status.conditions if c.type == ConditionType.CREATED), None)
    return f"{created.reason}: {created.message}" if created else ""


def refused(
    status: TrainingJobStatus, refusals: Sequence[Refusal], now: datetime, generation: int | None
) -> TrainingJobStatus:
    """After the actions: refused creations, recorded so they are retried with a delay and counted by the
    startup deadline. An invalid pod (422) fails the job on the next pass."""
    if not refusals:
        return status
    invalid = [r for r in refusals if r.code == 422]
    first = (invalid or list(refusals))[0]
    reason = INVALID if invalid else REFUSED
    names = ", ".join(r.name for r in refusals[:3]) + (f" and {len(refusals) - 3} more" if len(refusals) > 3 else "")
    message = f"Creating {names} was refused ({first.code}): {first.message}"
    conditions = set_condition(
        status.conditions,
        ConditionType.CREATED,
        False,
        reason,
        message[:4096],
        now=now,
        generation=generation,
        probed=now,
    )
    return status.model_copy(update={"conditions": conditions})
