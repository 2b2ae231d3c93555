"""Pod creation: the attempt's missing pods are created in one pass (in waves, see plan/waves.py), once the pods
of earlier attempts are gone (a pod stuck terminating is force-deleted once, and waited for with words:
plan/terminating.py) and the backoff is over. Refused creations (recorded after the wave that met them, in the
Created condition for pods, in Prepared for the Service, key Secret and NetworkPolicy: plan/waves.py) are retried
with a growing delay, and the startup deadline counts them; a pod the apiserver calls invalid fails the job at
once."""

from dataclasses import replace
from datetime import datetime

from trainingjob.children.specs import uses_default_image
from trainingjob.model import ConditionStatus, ConditionType, Phase, TrainingJobStatus
from trainingjob.plan import finished, prepared, replacement, terminating, tracking
from trainingjob.plan.backoff import backoff_seconds
from trainingjob.plan.slots import NAME_IN_USE, REFUSED, STUCK, Slot, slots
from trainingjob.plan.transitions import after, condition_of, seconds_until, with_condition
from trainingjob.plan.types import Context, Decision, Event

INVALID = "PodInvalid"
CREATING = "CreatingPods"
CREATED = "PodsCreated"
JOB_CREATED = "JobCreated"  # the Event of a job's first pass


def start(ctx: Context, status: TrainingJobStatus) -> Decision | None:
    """The first attempt begins: its number, the job's start time and an Event."""
    if status.attempt != 0:
        return None
    status = status.model_copy(update={"attempt": 1, "start_time": status.start_time or ctx.now})
    return Decision(status, events=(Event("Normal", JOB_CREATED, "Creating the pods of attempt 1."),))


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
    stuck = terminating.stuck(ctx, awaited)
    forced, service_wait = terminating.to_force(stuck), _service_wait(ctx, status)
    base = Decision(
        status if stuck else _unstuck(ctx, status),
        delete=delete,
        force_delete=tuple(p.name for p in forced),
        create_service=service_wait == 0.0,
        events=tuple(terminating.forced_event(p) for p in forced),
        requeue_after=service_wait or None,
    )
    waiting = terminating.waiting(ctx, base, stuck) if stuck else None
    missing = [s for s in slots(ctx, status) if s.is_missing]
    if not missing:
        return waiting or _all_created(ctx, base)
    if stale:
        return waiting or _wait(base, terminating.POLL_SECONDS)
    decision, not_before = waiting or base, _not_before(ctx, status)
    if not_before is not None and ctx.now < not_before:
        return _wait(
            decision, seconds_until(ctx, not_before, decision.requeue_after or ctx.settings.backoff_max_seconds)
        )
    ready, later = replacement.due(ctx, status, missing)  # workers replaced alone wait for their own backoff
    waited = None if later is None else max(seconds_until(ctx, later, ctx.settings.backoff_max_seconds), 0.1)
    if not ready and waited is not None:
        return _wait(decision, waited)
    every = waiting is None and len(ready) == len(missing)  # (a pod stuck terminating holds a slot yet)
    made = _create(ctx, decision, ready, every=every)  # the others are filled meanwhile
    return made if waited is None else replace(made, requeue_after=min(made.requeue_after or waited, waited))


def _unstuck(ctx: Context, status: TrainingJobStatus) -> TrainingJobStatus:
    """Once the pods waited for are gone, Created no longer says the job waits for them."""
    created = condition_of(status, ConditionType.CREATED)
    if created is None or created.reason != STUCK:
        return status
    message = f"Creating the pods of attempt {status.attempt}."
    return with_condition(ctx, status, ConditionType.CREATED, False, reason=CREATING, message=message)


def _service_wait(ctx: Context, status: TrainingJobStatus) -> float | None:
    """Seconds until the missing Service may be sent again after a refusal of what the pods need (0 when it may be
    now); None when it exists."""
    if ctx.observed.service_exists:
        return None
    held, settings = prepared.refused_now(status), ctx.settings
    if held is None:
        return 0.0
    moment = prepared.retry_at(held, settings.backoff_base_seconds, settings.backoff_max_seconds)
    return 0.0 if moment is None else max((moment - ctx.now).total_seconds(), 0.0)


def _wait(decision: Decision, seconds: float) -> Decision:
    return replace(decision, requeue_after=max(seconds, 0.1))


def _all_created(ctx: Context, decision: Decision) -> Decision:
    message = all_created(ctx, decision.status)
    status = with_condition(ctx, decision.status, ConditionType.CREATED, True, reason=CREATED, message=message)
    return replace(decision, status=status)


def _not_before(ctx: Context, status: TrainingJobStatus) -> datetime | None:
    """The earliest moment to create: after the backoff of the last failure (unless it was a worker's replaced alone:
    its own backoff, plan/replacement.py), and of the last refusal (of a pod, or of an object the pods need)."""
    moments: list[datetime | None] = []
    if status.last_failure is not None and not replacement.alone(status):
        moments.append(after(status.last_failure.time, backoff_seconds(ctx, status)))
    base, most = ctx.settings.backoff_base_seconds, ctx.settings.backoff_max_seconds
    created, held = condition_of(status, ConditionType.CREATED), prepared.refused_now(status)
    if created is not None and created.reason == REFUSED:
        moments.append(prepared.retry_at(created, base, most))
    if held is not None:
        moments.append(prepared.retry_at(held, base, most))
    found = [m for m in moments if m is not None]
    return max(found) if found else None


def all_created(ctx: Context, status: TrainingJobStatus) -> str:
    """The Created condition's message once every pod of the attempt exists."""
    return f"All {len(ctx.slots)} pods of attempt {status.attempt} were created."


def _create(ctx: Context, decision: Decision, missing: list[Slot], *, every: bool) -> Decision:
    """Create `missing` (`every` missing pod of the attempt, or those whose backoff is over)."""
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
    requeue = terminating.POLL_SECONDS if blocked else decision.requeue_after
    return replace(decision, status=status, create=ready, requeue_after=requeue, creates_all=every and not blocked)
