"""Restart in place. A DDP gang whose trainer failed (rank 0's agent says so) or stalled while every pod is up
restarts inside its pods: the restart is counted and recorded as the next attempt (the commit point), then rank 0's
agent is told to run it (again on every pass until it does: the order is idempotent, so an operator killed between
recording and telling tells on its next pass). Pods keep the attempt they were created for (status.podsAttempt).
Once every pod's agent runs the attempt it is done; if they do not within inPlaceTimeoutSeconds after the backoff
(or rank 0's agent does not answer at all for a few seconds), the gang falls back to new pods, the restart not
counted again. Pods that fail, vanish or are disrupted are the
failure policy's: they end the attempt the usual way."""

from datetime import UTC, datetime

from trainingjob.children.agent import Gang, GangState, RankFailure
from trainingjob.children.contract import ROLE_WORKER
from trainingjob.children.naming import Replica
from trainingjob.children.observe import PodPhase, PodState
from trainingjob.model import FailureClass, InPlaceRestart, Mode, Phase, TrainingJobStatus
from trainingjob.plan import classify, finished
from trainingjob.plan.backoff import in_place_backoff_seconds
from trainingjob.plan.classify import TRAINER_FAILED
from trainingjob.plan.slots import slots
from trainingjob.plan.transitions import after, moved, seconds_until
from trainingjob.plan.types import Context, Decision, Event

ORDER_POLL_SECONDS = 1.0
SILENT_SECONDS = 5.0  # rank 0's agent not answering this long after the backoff: no agent to tell (an older image?)


def possible(ctx: Context, status: TrainingJobStatus) -> bool:
    """Whether the gang can restart in its pods: DDP, in-place restarts on, and every pod up, not going, with an
    agent (the in-place label: pods made before the operator knew in place have none)."""
    if not ctx.settings.in_place_restart or ctx.job.spec.mode != Mode.DDP:
        return False
    every = slots(ctx, status)
    return bool(every) and all(
        s.pod is not None and s.pod.phase == PodPhase.RUNNING and not s.pod.deleting and s.pod.in_place for s in every
    )


def failed_trainers(ctx: Context, status: TrainingJobStatus) -> list[PodState]:
    """The current attempt's trainer failures rank 0's agent reports, as failed pods (the failure policy picks the
    root cause among them: a rank that did not just lose a peer, then the first to fail), when the gang can restart
    in place; none otherwise (a pod not up fails by itself once its agent stops waiting)."""
    return reported_failures(ctx, status) if possible(ctx, status) else []


def reported_failures(ctx: Context, status: TrainingJobStatus) -> list[PodState]:
    """The trainer failures rank 0's agent reports for the current attempt, as failed pods, whether or not the gang
    can restart in place (a failed pod's peers that lost it are its consequences)."""
    gang = ctx.observed.gang
    if gang is None or gang.state != GangState.FAILED or gang.attempt != status.attempt:
        return []
    return [_culprit(ctx, status, failure) for failure in gang.failures]


def decide(ctx: Context, status: TrainingJobStatus) -> Decision | None:
    """Follow the restart in place under way (a new failure of it is the failure policy's, which runs first)."""
    pending = status.in_place_restart
    if pending is None or pending.attempt != status.attempt:
        return None
    return _follow(ctx, status, pending)


def restart(ctx: Context, status: TrainingJobStatus, failure: FailureClass, verdict: classify.Verdict) -> Decision:
    """Count the restart and record the next attempt, in the same pods; the agents are told once it is written
    and the backoff is over."""
    attempt = status.attempt + 1
    update = {
        "restarts": classify.counted(status.restarts, failure),
        "in_place_restarts": status.in_place_restarts + 1,
        "attempt": attempt,
        "pods_attempt": status.current_pods_attempt,
        "in_place_restart": InPlaceRestart(attempt=attempt, time=ctx.now),
    }
    status = status.model_copy(update=update)
    message = f"{verdict.message} Restarting in place as attempt {attempt} from the newest checkpoint; the pods stay."
    status, events = moved(ctx, status, Phase.RESTARTING, verdict.reason, message)
    return Decision(status, events=events, requeue_after=max(in_place_backoff_seconds(ctx, status), 0.1), final=True)


def _follow(ctx: Context, status: TrainingJobStatus, pending: InPlaceRestart) -> Decision | None:
    """A restart in place under way: done once every pod's agent runs it; told (again) after the backoff; given up
    for new pods after the timeout; left to the failure policy if a pod is no longer up."""
    gang = ctx.observed.gang
    if gang is not None and gang.attempt == status.attempt and gang.all_running:
        return _done(ctx, status, pending)
    if not possible(ctx, status):
        return Decision(status.model_copy(update={"in_place_restart": None}))
    due = after(pending.time, in_place_backoff_seconds(ctx, status))
    deadline = after(due, ctx.settings.in_place_timeout_seconds)
    if ctx.now >= deadline or (gang is None and ctx.now >= after(due, SILENT_SECONDS)):
        return _fall_back(ctx, status, gang)
    if ctx.now < due:
        return Decision(status, requeue_after=seconds_until(ctx, due, ctx.settings.backoff_max_seconds), final=True)
    wait = seconds_until(ctx, deadline, ORDER_POLL_SECONDS)
    return Decision(status, order_attempt=status.attempt, requeue_after=max(wait, 0.1), final=True)


def _done(ctx: Context, status: TrainingJobStatus, pending: InPlaceRestart) -> Decision:
    """Running again, announced by one Event that says how long it took (the phase policy that runs next sees the
    job Running already: no second Event for the same moment)."""
    seconds = max((ctx.now - pending.time).total_seconds(), 0.0)
    message = f"Every pod runs attempt {status.attempt}, restarted in place {seconds:.1f} s after it was recorded."
    status = status.model_copy(update={"in_place_restart": None})
    if all(s.is_up for s in slots(ctx, status)):
        status, events = moved(ctx, status, Phase.RUNNING, "RestartedInPlace", message)
        return Decision(status, events=events)
    return Decision(status, events=(Event("Normal", "RestartedInPlace", message),))


def pods_failed_meanwhile(ctx: Context, status: TrainingJobStatus, found: list[PodState]) -> Decision | None:
    """Pods that failed while a restart in place was under way: one incident seen twice (the pod of a rank that died
    fails a moment after its peers' trainers said they lost it), so the restart takes new pods and is not counted
    again; the pod's failure becomes the evidence. A permanent failure still fails the job. None when no restart in
    place is under way."""
    pending = status.in_place_restart
    if pending is None or pending.attempt != status.attempt:
        return None
    policy = ctx.job.spec.run_policy
    failure, culprit = classify.root_cause(found, policy)
    others = classify.consequences(found, culprit)
    evidence = classify.last_failure(culprit, failure, ctx.now, status.attempt - 1, others)
    status = status.model_copy(update={"last_failure": evidence})
    what = classify.with_consequences(classify.describe(culprit), others)
    if failure == FailureClass.PERMANENT:
        verdict = classify.decide(failure, status.restarts, policy, what)
        return finished.finish(ctx, status, Phase.FAILED, verdict.reason, verdict.message)
    message = (
        f"{what} while the gang restarted in place: the same failure; re-creating the pods "
        f"for attempt {status.attempt} (not counted again)."
    )
    return _new_pods(ctx, status, Event("Warning", "InPlaceRestartAbandoned", message))


def _fall_back(ctx: Context, status: TrainingJobStatus, gang: Gang | None) -> Decision:
    """Every pod goes and attempt N gets pods of its own (after the pods are gone; the backoff is over)."""
    seen = (
        f"rank 0's agent runs attempt {gang.attempt} on {gang.running} of {gang.pods} pods"
        if gang
        else ("rank 0's agent did not answer")
    )
    waited = SILENT_SECONDS if gang is None else ctx.settings.in_place_timeout_seconds
    message = (
        f"The restart in place did not bring every pod back within {waited:g} s "
        f"({seen}); re-creating the pods for attempt {status.attempt}."
    )
    return _new_pods(ctx, status, Event("Warning", "InPlaceRestartTimedOut", message))


def _new_pods(ctx: Context, status: TrainingJobStatus, event: Event) -> Decision:
    """The attempt's pods all go; it gets pods of its own once they are gone."""
    update: dict[str, object] = {"in_place_restart": None, "pods_attempt": None, "tracked_pods": []}
    delete = tuple(p.name for p in ctx.observed.pods if not p.deleting)
    return Decision(status.model_copy(update=update), delete=delete, events=(event,), final=True)


def _culprit(ctx: Context, status: TrainingJobStatus, failed: RankFailure) -> PodState:
    """The failed rank as a failed pod (the pod itself is healthy): what the failure classes and evidence read."""
    replica = Replica(ROLE_WORKER, failed.rank)
    name = replica.pod_name(ctx.name, status.current_pods_attempt)
    pod = next((p for p in ctx.pods_of(status.current_pods_attempt) if p.name == name), None)
    finished_at = datetime.fromtimestamp(failed.time, UTC) if failed.time is not None else None
    return PodState(
        name=name,
        uid="",  # the pod is not what failed: the restart is counted by its attempt, not by a pod's UID
        replica=replica,
        attempt=status.current_pods_attempt,
        phase=PodPhase.FAILED,
        exit_code=failed.exit_code,
        finished_at=finished_at,
        reason=TRAINER_FAILED,
        message="",
        node=pod.node if pod else "",
    )
