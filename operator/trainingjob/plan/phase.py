"""The phase while a job runs, and the Running condition that says why it is not running yet: Running once
every pod of the attempt is up, but for a parameter-server job's workers beyond its minReplicas that wait for room
(plan/ps_room.py); it stays Running while a parameter-server worker is replaced; until then
Pending or Restarting, with the pods' waiting reasons, the scheduler's messages or the apiserver's refusal (a job
whose Service is missing is not called Running).
Also the replica counts, recomputed from the pods on every pass."""

from trainingjob.children.contract import ROLE_PS
from trainingjob.children.observe import PodPhase, PodState
from trainingjob.model import ConditionType, Mode, Phase, ReplicaStatus, TrainingJobStatus
from trainingjob.plan import prepared, progress, ps_room, tracking
from trainingjob.plan.slots import Slot, slots, summary
from trainingjob.plan.transitions import moved, with_condition
from trainingjob.plan.types import Context, Decision, Event

ALL_RUNNING = "AllReplicasRunning"  # the Event of every pod of an attempt running


def decide(ctx: Context, status: TrainingJobStatus) -> Decision:
    every = slots(ctx, status)
    waiting = [s for s in every if not s.is_up]
    total, attempt = len(every), status.attempt
    room = sorted(ps_room.waiting_for_room(ctx, every))  # workers beyond a parameter-server job's minReplicas
    if len(room) < len(waiting):
        return _not_running(ctx, status, waiting, total)
    if not ctx.observed.service_exists:
        return _no_service(ctx, status, total)
    note = progress.not_enforced(ctx, status)
    reason, message = ALL_RUNNING, f"All {total} pods of attempt {attempt} are running."
    if room:
        reason = "MinReplicasRunning"
        message = f"{total - len(room)} of {total} pods of attempt {attempt} are running; {', '.join(room)} wait "
        message += "for room on the nodes (workers beyond minReplicas)."
    message += f" {note}" if note else ""
    events: tuple[Event, ...] = ()
    if status.phase != Phase.RUNNING:
        status, events = moved(ctx, status, Phase.RUNNING, reason, message)
    running = with_condition(ctx, status, ConditionType.RUNNING, True, reason=reason, message=message)
    return Decision(running, events=events)


def _not_running(ctx: Context, status: TrainingJobStatus, waiting: list[Slot], total: int) -> Decision:
    """Pods the job waits for: still Running while a parameter-server worker is replaced, else not yet."""
    attempt = status.attempt
    detail = summary(waiting, status, ctx.observed.foreign)
    up = total - len(waiting)
    if status.phase == Phase.RUNNING:
        message = f"{up} of {total} pods of attempt {attempt} are running; {detail}."
        return Decision(
            with_condition(ctx, status, ConditionType.RUNNING, True, reason="ReplacingPods", message=message)
        )
    message = f"{up} of {total} pods of attempt {attempt} are running; {detail}."
    return Decision(with_condition(ctx, status, ConditionType.RUNNING, False, reason="PodsNotRunning", message=message))


def _no_service(ctx: Context, status: TrainingJobStatus, total: int) -> Decision:
    """Every pod is up but the job's Service is missing (refused?): its ranks cannot find each other by name, so a
    job is not called Running; one that runs already says so, while the Service is sent again."""
    held = prepared.refused_now(status)
    said = f": {held.message}" if held is not None else " (it is being created again)."
    message = f"All {total} pods of attempt {status.attempt} are up, but the job's Service is missing{said}"
    is_running = status.phase == Phase.RUNNING
    reason = "ReplacingService" if is_running else "ServiceMissing"
    return Decision(with_condition(ctx, status, ConditionType.RUNNING, is_running, reason=reason, message=message))


def counts(ctx: Context, status: TrainingJobStatus) -> TrainingJobStatus:
    """Pod counts of the current attempt per role, as they are now (zero when there are none)."""
    pods = [p for p in ctx.pods_of(status.current_pods_attempt) if not p.deleting]
    worker_slots = {r.pod_name(ctx.name, status.current_pods_attempt) for r in ctx.slots if r.role != ROLE_PS}
    gone_done = (tracking.succeeded_names(status) & worker_slots) - {p.name for p in pods}
    workers = _counts([p for p in pods if p.replica.role != ROLE_PS], len(gone_done))
    update: dict[str, object] = {"workers": workers}
    if ctx.job.spec.mode == Mode.PARAMETER_SERVER:
        update["parameter_servers"] = _counts([p for p in pods if p.replica.role == ROLE_PS], 0)
    return status.model_copy(update=update)


def _counts(pods: list[PodState], succeeded_and_gone: int) -> ReplicaStatus:
    return ReplicaStatus(
        active=sum(not p.is_finished for p in pods),
        ready=sum(p.ready for p in pods),
        succeeded=sum(p.phase == PodPhase.SUCCEEDED for p in pods) + succeeded_and_gone,
        failed=sum(p.phase == PodPhase.FAILED for p in pods),
    )
