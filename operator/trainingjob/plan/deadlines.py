"""The two deadlines that fail a job: activeDeadlineSeconds (its whole active life, time suspended not
counted) and startupDeadlineSeconds (a pod not running that long after it was created, or after its
creation was first refused, or after a node first refused to admit the slot's pod (plan/refused.py); while another
controller's scheduling gate holds a pod of the gang, from when the operator saw the last gate lifted; not while an
elastic job waits resizeWaitSeconds for room, plan/resize.py, nor for a parameter-server job's unplaced workers
beyond its minReplicas, plan/ps_room.py)."""

from datetime import timedelta

from trainingjob.model import FailureClass, LastFailure, Phase, TrainingJobStatus
from trainingjob.plan import finished, gates, ps_room, resize, terminating
from trainingjob.plan.slots import refusal_of, slots, summary, waiting_since, why
from trainingjob.plan.types import Context, Decision


def active(ctx: Context, status: TrainingJobStatus) -> Decision | None:
    limit, started = ctx.job.spec.run_policy.active_deadline_seconds, status.start_time
    if limit is None or started is None:
        return None
    used = (ctx.now - started).total_seconds() - status.suspended_seconds
    if used < limit:
        return Decision(status, requeue_after=min(limit - used, float(limit)))
    message = f"The job was active longer than activeDeadlineSeconds ({limit} s)."
    return finished.finish(ctx, status, Phase.FAILED, "DeadlineExceeded", message)


def startup(ctx: Context, status: TrainingJobStatus) -> Decision | None:
    limit = ctx.job.spec.run_policy.startup_deadline_seconds
    if resize.waiting_for_room(ctx, status):  # an elastic job's unplaced workers, waited for a bounded time
        return None
    queued = bool(gates.held(ctx, status))  # the gang waits for another controller's gate (plan/gates.py): its
    held = terminating.stuck_from(ctx)  # pods are not slow to start, though a refused creation still counts
    current = slots(ctx, status)
    room = ps_room.waiting_for_room(ctx, current)  # a parameter-server job's workers beyond its minReplicas
    counting = [
        (since, s)
        for s in current
        if not (queued and s.pod is not None)
        and s.name not in room
        and (since := waiting_since(s, status, held)) is not None
    ]
    if not counting:
        return None
    since, oldest = min(counting, key=lambda pair: (pair[0], pair[1].name))
    expires = since + timedelta(seconds=limit)
    if ctx.now < expires:
        return Decision(status, requeue_after=min((expires - ctx.now).total_seconds(), float(limit)))
    late = [s for _, s in sorted(counting, key=lambda pair: (pair[0], pair[1].name))]
    detail = summary(late, status, ctx.observed.foreign)
    message = (
        f"{len(late)} of {len(ctx.slots)} pods of attempt {status.attempt} were not running "
        f"{limit} s (startupDeadlineSeconds) after they were due: {detail}."
    )
    refusal = refusal_of(status, oldest)
    refused = refusal is not None and refusal.since == since
    if refusal is not None and refused:
        times = "once" if refusal.count == 1 else f"{refusal.count} times"
        message = (
            f"Pod {oldest.name} was refused by node {refusal.node or '(unknown)'}: {refusal.reason}, {times} in "
            f"{limit} s (startupDeadlineSeconds) since the first refusal; no node admitted it. {message}"
        )
    failure = LastFailure(
        pod=oldest.name,
        pod_uid=oldest.pod.uid if oldest.pod else None,
        attempt=max(status.attempt, 1),
        failure_class=FailureClass.DEADLINE,
        reason=refusal.reason if refusal is not None and refused else "StartupDeadlineExceeded",
        message=why(oldest, status, ctx.observed.foreign)[:1024],
        time=ctx.now,
    )
    return finished.finish(
        ctx, status.model_copy(update={"last_failure": failure}), Phase.FAILED, "StartupDeadlineExceeded", message
    )
