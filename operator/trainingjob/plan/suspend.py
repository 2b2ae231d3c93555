"""Suspend and resume (by a user or Kueue). Suspended: no pods (they get SIGTERM and their grace period to
checkpoint), and the activeDeadlineSeconds clock stops. Resumed: a new attempt if the suspended one had
pods, the same one if it never got any (suspended while queued or during a backoff)."""

from trainingjob.model import ConditionType, Phase, TrainingJobStatus
from trainingjob.plan import estimate
from trainingjob.plan.transitions import condition_of, holds, moved, with_condition
from trainingjob.plan.types import Context, Decision, Event


def decide(ctx: Context, status: TrainingJobStatus) -> Decision | None:
    if ctx.job.spec.run_policy.suspend:
        return _suspended(ctx, status)
    if status.phase == Phase.SUSPENDED:
        return _resumed(ctx, status)
    return None


def _suspended(ctx: Context, status: TrainingJobStatus) -> Decision:
    delete = tuple(p.name for p in ctx.observed.pods if not p.deleting)
    events: tuple[Event, ...] = ()
    if status.phase != Phase.SUSPENDED:
        message = "The job is suspended; its pods were stopped." if delete else "The job is suspended."
        status, events = moved(ctx, status, Phase.SUSPENDED, "JobSuspended", message)
    return Decision(estimate.stopped(status), delete=delete, events=events, final=True)


def _resumed(ctx: Context, status: TrainingJobStatus) -> Decision:
    had_pods = bool(status.tracked_pods or ctx.pods_of(status.current_pods_attempt))
    attempt = status.attempt + 1 if had_pods and status.attempt > 0 else status.attempt
    update: dict[str, object] = {
        "attempt": attempt,
        "suspended_seconds": status.suspended_seconds + _paused(ctx, status),
    }
    if attempt != status.attempt:
        update |= {"tracked_pods": [], "pods_attempt": None, "in_place_restart": None}
    status = status.model_copy(update=update)
    status = with_condition(
        ctx, status, ConditionType.SUSPENDED, False, reason="JobResumed", message="The job was resumed."
    )
    status = status.model_copy(update={"phase": Phase.PENDING})
    what = f"attempt {attempt}" if attempt else "its first attempt"
    return Decision(status, events=(Event("Normal", "JobResumed", f"The job resumed; starting {what}."),))


def _paused(ctx: Context, status: TrainingJobStatus) -> int:
    """Seconds of the suspension that just ended that fell after the job started (they are not active time)."""
    suspended = condition_of(status, ConditionType.SUSPENDED)
    if status.start_time is None or suspended is None or not holds(status, ConditionType.SUSPENDED):
        return 0
    since = max(suspended.last_transition_time, status.start_time)
    return max(int((ctx.now - since).total_seconds()), 0)
