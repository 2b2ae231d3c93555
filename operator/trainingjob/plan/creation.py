"""Pod creation: the attempt's missing pods are created in one pass (in waves, see plan/waves.py), once the pods
of earlier attempts are gone (a pod stuck terminating is force-deleted after a timeout) and the backoff is over.
Refused creations (recorded in the Created condition after the wave that met them, plan/waves.py) are retried with
a growing delay, and the startup deadline counts them; a pod the apiserver calls invalid fails the job at once."""

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from trainingjob.children.observe import PodState
from trainingjob.children.specs import uses_default_image
from trainingjob.model import ConditionStatus, ConditionType, Phase, TrainingJobStatus
from trainingjob.plan import finished, replacement, tracking
from trainingjob.plan.backoff import backoff_seconds
from trainingjob.plan.slots import NAME_IN_USE, REFUSED, Slot, slots
from trainingjob.plan.transitions import after, condition_of, seconds_until, with_condition
from trainingjob.plan.types import Context, Decision, Event

INVALID = "PodInvalid"
CREATING = "CreatingPods"
STALE_POLL_SECONDS = 2.0


def start(ctx: Context, status: TrainingJobStatus) -> Decision | None:
    """The first attempt begins: its number, the job's start time and an Event."""
    if status.attempt != 0:
        return None
    status = status.model_copy(update={"attempt": 1, "start_time": status.start_time or ctx.now})
    return Decision(status, events=(Event("Normal", "JobCreated", "Creating the pods of attempt 1."),))


def _stuck(ctx: Context, pods: Sequence[PodState]) -> tuple[str, ...]:
    """Pods still terminating terminatingTimeout after their grace period ended (their node is gone?)."""
    limit = ctx.settings.terminating_timeout_seconds
    return tuple(p.name for p in pods if p.deleting_since and (ctx.now - p.deleting_since).total_seconds() >= limit)


def decide(ctx: Context, status: TrainingJobStatus) -> Decision | None:
    created = condition_of(status, ConditionType.CREATED)
    if created is not None and created.status == ConditionStatus.FALSE and created.reason == INVALID:
        message = f"The apiserver refuses the job's pods as invalid: {created.message}"
        return finished.finish(ctx, status, Phase.FAILED, INVALID, message)
    counted_uids, pods_attempt = tracking.counted_uids(status), status.current_pods_attempt
    awaited = [p for p in ctx.observed.pods if p.deleting and (p.attempt != pods_attempt or p.uid in counted_uids)]
    stale = ctx.stale(pods_attempt)
    counted = [p for p in ctx.pods_of(pods_attempt) if p.uid in counted_uids]
    delete = tuple(p.name for p in [*stale, *counted] if not p.deleting)  # again, if a crash cut the first off
    events = tuple(Event("Warning", "ForceDeleted", _forced(p)) for p in awaited if p.name in _stuck(ctx, awaited))
    base = Decision(
        status,
        delete=delete,
        force_delete=_stuck(ctx, awaited),
        create_service=not ctx.observed.service_exists,
        events=events,
    )
    missing = [s for s in slots(ctx, status) if s.is_missing]
    if not missing:
        return _all_created(ctx, base)
    if stale:
        return _wait(base, STALE_POLL_SECONDS)
    not_before = _not_before(ctx, status)
    if not_before is not None and ctx.now < not_before:
        return _wait(base, seconds_until(ctx, not_before, ctx.settings.backoff_max_seconds))
    ready, later = replacement.due(ctx, status, missing)  # workers replaced alone wait for their own backoff
    waited = None if later is None else max(seconds_until(ctx, later, ctx.settings.backoff_max_seconds), 0.1)
    if not ready and waited is not None:
        return _wait(base, waited)
    made = _create(ctx, base, ready)
    return made if waited is None else replace(made, requeue_after=min(made.requeue_after or waited, waited))


def _forced(pod: PodState) -> str:
    where = f" on node {pod.node}" if pod.node else ""
    return f"Force-deleted pod {pod.name}{where}: it was still terminating long after its grace period (node lost?)."


def _wait(decision: Decision, seconds: float) -> Decision:
    return replace(decision, requeue_after=max(seconds, 0.1))


def _all_created(ctx: Context, decision: Decision) -> Decision:
    message = f"All {len(ctx.slots)} pods of attempt {decision.status.attempt} were created."
    status = with_condition(ctx, decision.status, ConditionType.CREATED, True, reason="PodsCreated", message=message)
    return replace(decision, status=status)


def _not_before(ctx: Context, status: TrainingJobStatus) -> datetime | None:
    """The earliest moment to create: after the backoff of the last failure (unless it was a worker's replaced alone:
    its own backoff, plan/replacement.py), and of the last refusal."""
    moments = []
    if status.last_failure is not None and not replacement.alone(status):
        moments.append(after(status.last_failure.time, backoff_seconds(ctx, status)))
    created = condition_of(status, ConditionType.CREATED)
    if created is not None and created.reason == REFUSED and created.last_probe_time is not None:
        tried = (created.last_probe_time - created.last_transition_time).total_seconds()
        delay = min(max(tried, ctx.settings.backoff_base_seconds), ctx.settings.backoff_max_seconds)
        moments.append(after(created.last_probe_time, delay))
    return max(moments) if moments else None


def _create(ctx: Context, decision: Decision, missing: list[Slot]) -> Decision:
    status = decision.status
    blocked = [s for s in missing if s.name in ctx.observed.foreign]
    ready = tuple(s.replica for s in missing if s not in blocked)
    if blocked:
        message = (
            f"Pod {blocked[0].name} belongs to another object (a deleted job of the same name?); waiting for it to go."
        )
        status = with_condition(ctx, status, ConditionType.CREATED, False, reason=NAME_IN_USE, message=message)
    else:
        created = condition_of(status, ConditionType.CREATED)
        if created is None or created.status != ConditionStatus.FALSE:
            message = f"Creating {len(ready)} pods of attempt {status.attempt}."
            status = with_condition(ctx, status, ConditionType.CREATED, False, reason=CREATING, message=message)
    if ready and status.default_image is None and uses_default_image(ctx.job):
        status = status.model_copy(update={"default_image": ctx.settings.default_trainer_image})
    return replace(decision, status=status, create=ready, requeue_after=STALE_POLL_SECONDS if blocked else None)
