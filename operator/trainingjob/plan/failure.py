"""Failures of the current attempt: pods that failed, were deleted by someone else, or vanished, and (rank 0's agent
says so) a trainer that failed inside a healthy pod. DDP (or a parameter server failing): the attempt ends and the
whole gang restarts after a backoff (in its pods when they are all up: a stall, plan/in_place.py). ParameterServer
mode: each failed worker is replaced alone (a worker whose trainer failed in a healthy pod restarts in it instead:
plan/worker_in_place.py). Every failure is counted exactly once, by pod UID."""

from dataclasses import replace

from trainingjob.children.contract import ROLE_PS
from trainingjob.children.naming import Replica
from trainingjob.children.observe import PodPhase, PodState
from trainingjob.model import FailureClass, Mode, Phase, TrainingJobStatus
from trainingjob.plan import classify, finished, in_place, refused, replacement, tracking, worker_in_place
from trainingjob.plan.backoff import backoff_seconds
from trainingjob.plan.transitions import moved, seconds_until
from trainingjob.plan.types import Context, Decision, Event

VANISHED = "the pod is gone before it finished (evicted, preempted, its node lost, or deleted by someone)"
DELETED = "the pod was deleted by someone other than the operator before it finished"
PEER_LOST_WAIT_SECONDS = 5.0


def failures(ctx: Context, status: TrainingJobStatus) -> list[PodState]:
    """The attempt's uncounted failures, oldest first: failed, deleted by others, or vanished."""
    found, counted = [], tracking.counted_uids(status)
    for pod in ctx.pods_of(status.current_pods_attempt):
        if pod.phase == PodPhase.SUCCEEDED or pod.uid in counted or refused.waits(pod):
            continue
        if pod.has_failed:
            found.append(pod)
        elif pod.deleting:  # the operator deletes only counted pods of the current attempt
            found.append(replace(pod, disrupted=True, reason=pod.reason or "Deleted", message=DELETED))
    slots = {r.pod_name(ctx.name, status.current_pods_attempt): r for r in ctx.slots}
    for gone in tracking.vanished(ctx, status):
        replica = slots.get(gone.name)
        found.append(_vanished(gone.name, gone.uid, replica or Replica("worker", 0), status.current_pods_attempt))
    return found


def _vanished(name: str, uid: str, replica: Replica, attempt: int) -> PodState:
    return PodState(name, uid, replica, attempt, PodPhase.UNKNOWN, disrupted=True, reason="Vanished", message=VANISHED)


def decide(ctx: Context, status: TrainingJobStatus) -> Decision | None:
    found = failures(ctx, status)
    if not found:
        found = in_place.failed_trainers(ctx, status)
        if not found:
            return None
    elif ctx.job.spec.mode == Mode.PARAMETER_SERVER and all(p.replica.role != ROLE_PS for p in found):
        rest, again = worker_in_place.abandoned(ctx, status, found)
        if again is None or not rest:
            return again or _replace_workers(ctx, status, found)
        replaced = _replace_workers(ctx, again.status, rest)
        return replace(replaced, delete=again.delete + replaced.delete, events=again.events + replaced.events)
    else:
        names = {p.name for p in found}  # the trainers that failed in pods still up: consequences, or the cause
        found += [p for p in in_place.reported_failures(ctx, status) if p.name not in names]
        meanwhile = in_place.pods_failed_meanwhile(ctx, status, found)
        if meanwhile is not None:
            return meanwhile
    wait = _cause_due_in(ctx, status, found)
    return Decision(status, requeue_after=wait, final=True) if wait else _end_attempt(ctx, status, found)


def _cause_due_in(ctx: Context, status: TrainingJobStatus, found: list[PodState]) -> float:
    """Seconds to wait for the root cause when every rank seen failed only because it lost a peer (exit 75) while
    others still run: the rank that died may be reported a moment later than the peers that noticed (another
    node's kubelet). At most PEER_LOST_WAIT_SECONDS after the first of them ended, on the pod's clock; a node clock
    ahead of the operator's waits not at all. 0: decide now."""
    if not all(classify.peer_lost(p) for p in found):
        return 0.0
    names = {p.name for p in found}
    others = [p for p in ctx.pods_of(status.current_pods_attempt) if p.name not in names]
    if not any(p.phase == PodPhase.RUNNING and not p.deleting for p in others):
        return 0.0
    ended = [p.finished_at for p in found if p.finished_at is not None]
    if not ended:
        return 0.0
    waited = (ctx.now - min(ended)).total_seconds()
    return PEER_LOST_WAIT_SECONDS - waited if 0 <= waited < PEER_LOST_WAIT_SECONDS else 0.0


def _end_attempt(ctx: Context, status: TrainingJobStatus, found: list[PodState]) -> Decision:
    policy = ctx.job.spec.run_policy
    failure, culprit = classify.root_cause(found, policy)
    others = classify.consequences(found, culprit)
    verdict = classify.decide(
        failure, status.restarts, policy, classify.with_consequences(classify.describe(culprit), others)
    )
    evidence = classify.last_failure(culprit, failure, ctx.now, status.attempt, others)
    status = status.model_copy(update={"last_failure": evidence})
    if not verdict.restart:
        return finished.finish(ctx, status, Phase.FAILED, verdict.reason, verdict.message)
    return restart(ctx, status, failure, verdict)


def restart(ctx: Context, status: TrainingJobStatus, failure: FailureClass, verdict: classify.Verdict) -> Decision:
    """End the current attempt: in its pods when the gang can restart in place (plan/in_place.py), else all its pods
    go and the next attempt gets pods of its own after the backoff."""
    if in_place.possible(ctx, status):
        return in_place.restart(ctx, status, failure, verdict)
    attempt = status.attempt + 1
    counted = classify.counted(status.restarts, failure)
    status = status.model_copy(
        update={"restarts": counted, "attempt": attempt, "tracked_pods": [], "pods_attempt": None}
        | {"in_place_restart": None, "replacements": []}
    )
    message = f"{verdict.message} Restarting as attempt {attempt} from the newest checkpoint."
    status, events = moved(ctx, status, Phase.RESTARTING, verdict.reason, message)
    delete = tuple(p.name for p in ctx.observed.pods if not p.deleting)
    return Decision(status, delete=delete, events=events, requeue_after=backoff_seconds(ctx, status), final=True)


def stalled(ctx: Context, status: TrainingJobStatus, culprit: PodState, what: str, reason: str) -> Decision:
    """End the attempt as a stall (a gang that makes no progress): `what` says why, `reason` goes to lastFailure;
    restarted from the newest checkpoint within backoffLimit, else the job fails."""
    verdict = classify.decide(FailureClass.STALLED, status.restarts, ctx.job.spec.run_policy, what)
    failure = classify.last_failure(culprit, FailureClass.STALLED, ctx.now, status.attempt)
    status = status.model_copy(update={"last_failure": failure.model_copy(update={"reason": reason})})
    if not verdict.restart:
        return finished.finish(ctx, status, Phase.FAILED, verdict.reason, verdict.message)
    return restart(ctx, status, FailureClass.STALLED, verdict)


def _replace_workers(ctx: Context, status: TrainingJobStatus, found: list[PodState]) -> Decision:
    """ParameterServer mode: each failed worker is counted and replaced alone, after a backoff of its own
    (plan/replacement.py); the others keep training. If one of them cannot be restarted, the job fails and none of
    them is counted (none is replaced)."""
    policy, restarts, events = ctx.job.spec.run_policy, status.restarts, []
    ordered = sorted(found, key=lambda p: (p.finished_at is None, p.finished_at, p.replica))
    classes = [(pod, classify.classify(pod, policy)) for pod in ordered]
    for pod, failure in classes:
        verdict = classify.decide(failure, restarts, policy, classify.describe(pod))
        if not verdict.restart:
            evidence = classify.last_failure(pod, failure, ctx.now, status.attempt)
            status = status.model_copy(update={"last_failure": evidence})
            return finished.finish(ctx, status, Phase.FAILED, verdict.reason, verdict.message)
        restarts = classify.counted(restarts, failure)
        events.append(
            Event("Warning", verdict.reason, f"{verdict.message} Replacing worker {pod.replica.index} alone.")
        )
    last = ordered[-1]
    evidence = classify.last_failure(last, classify.classify(last, policy), ctx.now, status.attempt)
    status = status.model_copy(update={"restarts": restarts, "last_failure": evidence})
    gone = [t for t in tracking.vanished(ctx, status) if t.uid in {p.uid for p in ordered}]
    present = [p for p in ordered if p.uid not in {t.uid for t in gone}]
    status = replacement.replaced(ctx, tracking.counted_failed(status, present, gone), classes)
    delete = tuple(p.name for p in present if not p.deleting)
    due = replacement.next_due(ctx, status) or ctx.now
    requeue = max(seconds_until(ctx, due, ctx.settings.backoff_max_seconds), 0.1)
    return Decision(status, delete=delete, events=tuple(events), requeue_after=requeue)
