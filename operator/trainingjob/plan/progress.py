"""The trainer's progress: record rank 0's latest report (a step never goes back), and restart an attempt
as Stalled when it has reported once and then not for progressDeadlineSeconds. An attempt that never
reports (a program without the progress endpoint, or the operator not reading it), or whose rank 0 said it
finished training, is never called stalled.

Staleness is judged on the operator's clock only, as a Lease's holder is: the status keeps when the operator
last saw the report change (lastChangeTime), and the deadline runs from that, never from the trainer's own
timestamps (its node's clock may be minutes off). It is in the status, so a restarted operator keeps it."""

from datetime import datetime, timedelta

from trainingjob.children.contract import ROLE_WORKER
from trainingjob.children.naming import Replica
from trainingjob.children.observe import PodPhase, PodState
from trainingjob.model import Phase, Progress, TrainingJobStatus
from trainingjob.plan import estimate, failure
from trainingjob.plan.transitions import seconds_until
from trainingjob.plan.types import Context, Decision


def recorded(ctx: Context, status: TrainingJobStatus) -> TrainingJobStatus:
    """The status with the newest report and checkpoint; a new attempt's first reports may lag behind (they
    bring their heartbeat, estimate, resume point, first step's time and checkpoint stall, not their step)."""
    reported, last = ctx.observed.progress, status.progress
    update: dict[str, object] = {}
    if reported is not None:
        seen = _seen(ctx, reported, last)
        reported = estimate.on_our_clock(reported, ctx.now).model_copy(update={"last_change_time": seen})
        if last is not None and reported.step < last.step:
            reported = last.model_copy(
                update={
                    "last_heartbeat_time": reported.last_heartbeat_time,
                    "last_change_time": reported.last_change_time,
                    "attempt": reported.attempt,
                    "estimated_completion_time": reported.estimated_completion_time,
                    "resumed_from_step": reported.resumed_from_step,
                    "first_step_time": reported.first_step_time,
                    "checkpoint_stall_seconds": reported.checkpoint_stall_seconds,
                    "finished": reported.finished,
                }
            )
        update["progress"] = estimate.for_people(reported)
    if ctx.observed.checkpoint is not None:
        update["last_checkpoint"] = ctx.observed.checkpoint
    return status.model_copy(update=update) if update else status


def _seen(ctx: Context, reported: Progress, last: Progress | None) -> datetime:
    """When the report was last news, on the operator's clock: now if it is news now."""
    if last is None or last.last_change_time is None or changed(reported, last):
        return ctx.now
    return last.last_change_time


def changed(reported: Progress, last: Progress) -> bool:
    """Whether rank 0's report is news: another attempt, heartbeat or end of training, or a step further on (a
    lagging first report of a new attempt, a lower step, is news only by its heartbeat)."""
    said = (reported.attempt, reported.last_heartbeat_time, reported.finished)
    return said != (last.attempt, last.last_heartbeat_time, last.finished) or reported.step > last.step


def record(ctx: Context, status: TrainingJobStatus) -> Decision:
    return Decision(recorded(ctx, status))


def heartbeat_source(ctx: Context, status: TrainingJobStatus) -> Progress | None:
    """The current attempt's last report, when it has made one: the deadline runs from when it last changed."""
    progress = status.progress
    if progress is None or progress.attempt != status.attempt or progress.last_heartbeat_time is None:
        return None
    return progress


def not_enforced(ctx: Context, status: TrainingJobStatus) -> str:
    """Why progressDeadlineSeconds does not apply to this attempt, or "" when it does (or is unset)."""
    if ctx.job.spec.run_policy.progress_deadline_seconds is None or heartbeat_source(ctx, status) is not None:
        return ""
    if not ctx.settings.read_progress:
        return "progressDeadlineSeconds is not enforced: the operator does not read progress (readProgress is off)."
    return "progressDeadlineSeconds is not enforced yet: rank 0 of this attempt has reported no progress."


def stalled(ctx: Context, status: TrainingJobStatus) -> Decision | None:
    limit = ctx.job.spec.run_policy.progress_deadline_seconds
    source, rank0 = heartbeat_source(ctx, status), _rank0_pod(ctx, status)
    # rank 0's pod gone or going (a PS worker replaced alone): its silence is not a stall
    up = rank0 is not None and rank0.phase == PodPhase.RUNNING and not rank0.deleting
    if limit is None or source is None or status.phase != Phase.RUNNING or rank0 is None or not up:
        return None
    # done training, rank 0 may wait in silence for the others (parameter-server mode); or a worker was replaced
    # alone this pass: one count a pass, the next pass (its status write wakes one) judges the stall
    if source.finished or status.restarts != (ctx.job.status or status).restarts:
        return None
    if source.last_change_time is None:  # a status an older operator wrote: the deadline runs from now, our clock
        status = status.model_copy(update={"progress": source.model_copy(update={"last_change_time": ctx.now})})
        return Decision(status, requeue_after=float(limit))
    # a rank 0 replaced alone (parameter-server mode) gets the whole deadline from its replacement, on our clock
    replaced = [r.not_before for r in status.replacements if r.pod == rank0.name]
    expires = max([source.last_change_time, *replaced]) + timedelta(seconds=limit)
    if ctx.now < expires:
        return Decision(status, requeue_after=seconds_until(ctx, expires, float(limit)))
    what = f"Rank 0 reported no progress for {limit} s (progressDeadlineSeconds) after step {source.step}"
    return failure.stalled(ctx, status, _rank0(ctx, status), what, "Stalled")


def _rank0_pod(ctx: Context, status: TrainingJobStatus) -> PodState | None:
    name = Replica(ROLE_WORKER, 0).pod_name(ctx.name, status.current_pods_attempt)
    return next((p for p in ctx.pods_of(status.current_pods_attempt) if p.name == name), None)


def _rank0(ctx: Context, status: TrainingJobStatus) -> PodState:
    replica = Replica(ROLE_WORKER, 0)
    found = _rank0_pod(ctx, status)
    return found or PodState(
        replica.pod_name(ctx.name, status.current_pods_attempt),
        "",
        replica,
        status.current_pods_attempt,
        PodPhase.RUNNING,
    )
