"""Suspend and resume (by a user, or by Kueue: plan/queue.py). Suspended: no pods (they get SIGTERM and their
grace period to checkpoint), and the activeDeadlineSeconds clock stops. Resumed: a new attempt if the suspended
one had pods, the same one if it never got any (suspended while queued or during a backoff). A queued job that
Kueue has not admitted yet stays Pending, with no pods, until it is. A queued job suspended reads its Workload
again until it is deactivated and holds no quota (plan/queue.py)."""

from trainingjob.model import ConditionType, Phase, TrainingJobStatus
from trainingjob.plan import estimate, queue
from trainingjob.plan.transitions import condition_of, holds, moved, with_condition
from trainingjob.plan.types import Context, Decision, Event


def decide(ctx: Context, status: TrainingJobStatus) -> Decision | None:
    held = queue.hold(ctx, status)
    marked = queue.marked(ctx, status, held)
    if ctx.job.spec.run_policy.suspend:
        return _suspended(ctx, marked)
    if held is not None:
        if queue.waiting_first(ctx, marked):
            return Decision(marked, requeue_after=queue.POLL_SECONDS, final=True)
        return _suspended(ctx, marked, held)
    if status.phase == Phase.SUSPENDED:
        return _resumed(ctx, marked)
    poll = queue.polled(ctx, marked)
    return Decision(marked, requeue_after=poll) if marked != status or poll is not None else None


def _suspended(ctx: Context, status: TrainingJobStatus, held: queue.Hold | None = None) -> Decision:
    delete = tuple(p.name for p in ctx.observed.pods if not p.deleting)
    events: tuple[Event, ...] = ()
    if status.phase != Phase.SUSPENDED:
        reason, message = ("JobSuspended", "The job is suspended.") if held is None else (held.reason, held.message)
        message = f"{message[:-1]}; its pods were stopped." if delete and held is None else message
        status, events = moved(ctx, status, Phase.SUSPENDED, reason, message)
    requeue = queue.POLL_SECONDS if held is not None or queue.settling(ctx) else None
    return Decision(estimate.stopped(status), delete=delete, events=events, requeue_after=requeue, final=True)


def _resumed(ctx: Context, status: TrainingJobStatus) -> Decision:
    had_pods = bool(status.tracked_pods or ctx.pods_of(status.current_pods_attempt))
    attempt = status.attempt + 1 if had_pods and status.attempt > 0 else status.attempt
    update: dict[str, object] = {
        "attempt": attempt,
        "suspended_seconds": status.suspended_seconds + _paused(ctx, status),
        "replacements": [],  # the slots' backoffs and refusals by nodes: time suspended is no wait for a node
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
