"""An elastic DDP job (workers.minReplicas below replicas) resized: plan/elastic.py decides the next world size from
the current attempt's pods and the room seen for more (Observed.spare), and this policy acts on it.

A Shrink is a gang restart at once, at the smaller size, from the newest checkpoint: every pod goes, the next
attempt gets pods of its own (status.scale.current of them, children/specs.worker_count). A Grow waits for the
next checkpoint: status.scale.growAfterStep records the newest checkpoint's step when room was seen, rank 0's
agent is asked for a newer one (on every pass until it comes: the ask is idempotent; pods without an agent wait
for the periodic one), and the gang restarts at the larger size once a newer one is reported (not mid-step; a job
without checkpoints never grows, as a restart would lose all its work). A resize is not a failure: no restart is
counted, no backoff is waited, and lastFailure is untouched. Each resize is a Resized Event; the history records
the new attempt (the timeline).
While the current attempt waits for room within resizeWaitSeconds the startup deadline does not count
(`waiting_for_room`, plan/deadlines.py), and the reconcile comes back when the wait ends; a shrunk job looks for
room again every resizeWaitSeconds."""

from trainingjob.children.contract import ROLE_WORKER
from trainingjob.children.naming import Replica
from trainingjob.children.observe import PodPhase
from trainingjob.children.specs import worker_count
from trainingjob.model import Mode, Phase, TrainingJobStatus, WorkerScale
from trainingjob.plan import ps_room
from trainingjob.plan.elastic import Resize, ScaleReason, Sizes, WorldSize, capacity_of, next_world_size, scale_status
from trainingjob.plan.slots import slots
from trainingjob.plan.transitions import moved, seconds_until
from trainingjob.plan.types import Context, Decision, Event

RESIZED = "Resized"
RESTART_POLL_SECONDS = 1.0  # the next attempt's pods are created once the resized gang's are gone
ASKED_POLL_SECONDS = 5.0  # a checkpoint asked for to grow at: its report read again this often


def elastic(ctx: Context) -> bool:
    workers = ctx.job.spec.workers
    return ctx.job.spec.mode == Mode.DDP and workers.fewest_replicas < workers.replicas


def sizes(ctx: Context) -> Sizes:
    workers = ctx.job.spec.workers
    return Sizes(desired=workers.replicas, fewest=workers.fewest_replicas, current=worker_count(ctx.job))


def world_size(ctx: Context, status: TrainingJobStatus) -> WorldSize:
    """The elastic decision for the current attempt's pods (plan/elastic.py) with the operator's settings."""
    scale, settings = status.scale, ctx.settings
    return next_world_size(
        sizes(ctx),
        capacity_of(ctx.pods_of(status.current_pods_attempt), ctx.observed.spare),
        last_resize=scale.last_resize_time if scale is not None else None,
        now=ctx.now,
        wait=settings.resize_wait_seconds,
        interval=settings.resize_interval_seconds,
    )


def waiting_for_room(ctx: Context, status: TrainingJobStatus) -> bool:
    """Whether the current attempt's unplaced workers are waited for within resizeWaitSeconds: the startup
    deadline does not count meanwhile."""
    return elastic(ctx) and world_size(ctx, status).reason == ScaleReason.WAITING


def decide(ctx: Context, status: TrainingJobStatus) -> Decision | None:
    if status.phase in (Phase.SUSPENDED, Phase.SUCCEEDED, Phase.FAILED) or status.in_place_restart is not None:
        return None
    now_sizes, fewest = (
        sizes(ctx),
        ctx.job.spec.workers.fewest_replicas if elastic(ctx) else ctx.job.spec.workers.replicas,
    )
    if now_sizes.current < fewest:  # minReplicas raised or removed while the job ran shrunk: back to the fewest now
        message = f"{now_sizes.current} of {now_sizes.desired} workers, fewer than the {fewest} the spec now allows"
        return _resize(ctx, status, WorldSize(Resize.GROW, fewest, ScaleReason.BELOW_MIN, message))
    if not elastic(ctx):  # status.scale still says current/desired: kubectl get's WORKERS column
        stay = _fixed_size(ctx, status, now_sizes)
        return Decision(status.model_copy(update={"scale": scale_status(status.scale, now_sizes, stay, ctx.now)}))
    decision = world_size(ctx, status)
    if decision.action == Resize.SHRINK:
        return _resize(ctx, status, decision)
    scale = scale_status(status.scale, now_sizes, decision, ctx.now)
    if decision.action == Resize.GROW:
        return _grow_at_checkpoint(ctx, status, scale, decision)
    return _stay(ctx, status.model_copy(update={"scale": scale}), decision, now_sizes)


def _fixed_size(ctx: Context, status: TrainingJobStatus, now_sizes: Sizes) -> WorldSize:
    """A job that is never resized: a DDP job that is not elastic, or a parameter-server job, whose workers beyond
    minReplicas may wait for room (plan/ps_room.py)."""
    waiting = ps_room.waiting_for_room(ctx, slots(ctx, status))
    of = f"{now_sizes.current} of {now_sizes.desired} workers"
    if waiting:
        message = f"{of}; {', '.join(sorted(waiting))} wait for room (beyond minReplicas {now_sizes.fewest})"
        return WorldSize(Resize.STAY, now_sizes.current, ScaleReason.WAITING, message)
    if ctx.job.spec.workers.min_replicas is not None and ctx.job.spec.mode == Mode.PARAMETER_SERVER:
        return WorldSize(Resize.STAY, now_sizes.current, ScaleReason.ALL_WORKERS, of)
    return WorldSize(Resize.STAY, now_sizes.current, ScaleReason.NOT_ELASTIC, f"{of}: not elastic")


def _stay(ctx: Context, status: TrainingJobStatus, decision: WorldSize, now_sizes: Sizes) -> Decision:
    """No resize now: come back when the wait or the interval ends, and while shrunk to look for room again."""
    settings = ctx.settings
    if decision.recheck_at is not None:
        wait = seconds_until(ctx, decision.recheck_at, settings.resize_interval_seconds)
        return Decision(status, requeue_after=max(wait, 0.1))
    if now_sizes.current < now_sizes.desired:  # nothing else wakes the reconcile when nodes come back
        return Decision(status, requeue_after=settings.resize_wait_seconds)
    return Decision(status)


def _grow_at_checkpoint(ctx: Context, status: TrainingJobStatus, scale: WorkerScale, decision: WorldSize) -> Decision:
    """Room for more: note the newest checkpoint's step, ask rank 0 for a newer one (its agent, where it has one;
    else the periodic one comes), and grow once a newer one is reported."""
    newest = status.last_checkpoint.step if status.last_checkpoint is not None else 0
    previous = status.scale.grow_after_step if status.scale is not None else None
    if previous is not None and ctx.job.spec.checkpoint is not None and newest > previous:
        return _resize(ctx, status, decision)
    after = newest if previous is None else previous
    waiting = scale.model_copy(update={"grow_after_step": after})
    if ctx.job.spec.checkpoint is None:
        waiting = waiting.model_copy(update={"message": f"{decision.message}; the job has no checkpoints to grow at"})
        return Decision(status.model_copy(update={"scale": waiting}), requeue_after=ctx.settings.resize_wait_seconds)
    asked = after if _rank0_has_an_agent(ctx, status) else None
    wait = min(ASKED_POLL_SECONDS, ctx.settings.resize_wait_seconds) if asked is not None else None
    return Decision(
        status.model_copy(update={"scale": waiting}),
        requeue_after=wait or ctx.settings.resize_wait_seconds,
        ask_checkpoint=asked,
    )


def _rank0_has_an_agent(ctx: Context, status: TrainingJobStatus) -> bool:
    """Whether rank 0's pod of the running attempt has an agent to ask for a checkpoint (children/agent.py)."""
    rank0 = Replica(ROLE_WORKER, 0)
    pods = ctx.pods_of(status.current_pods_attempt)
    return any(p.replica == rank0 and p.in_place and p.phase == PodPhase.RUNNING and not p.deleting for p in pods)


def _resize(ctx: Context, status: TrainingJobStatus, decision: WorldSize) -> Decision:
    """A gang restart at decision.workers, not counted as a failure: all pods go, the next attempt has its own."""
    before, attempt = sizes(ctx), status.attempt + 1
    after = Sizes(desired=before.desired, fewest=before.fewest, current=decision.workers)
    scale = scale_status(status.scale, after, decision, ctx.now)
    status = status.model_copy(
        update={"attempt": attempt, "tracked_pods": [], "pods_attempt": None, "replacements": [], "scale": scale}
    )
    verb = "Shrinking" if decision.workers < before.current else "Growing"
    message = (
        f"{verb} from {before.current} to {decision.workers} of {before.desired} workers ({decision.message}). "
        f"Restarting as attempt {attempt} from the newest checkpoint; a resize is not counted as a restart."
    )
    status, _ = moved(ctx, status, Phase.RESTARTING, RESIZED, message)
    delete = tuple(p.name for p in ctx.observed.pods if not p.deleting)
    event = Event("Normal", RESIZED, message)
    return Decision(status, delete=delete, events=(event,), requeue_after=RESTART_POLL_SECONDS, final=True)
