"""Parameter-server workers restart in place. Each worker's agent is a gang of one (children/agent.py): when its
trainer fails in a healthy pod, its readiness probe fails and the operator reads its account (reconcile/ps_workers.py).
The failure is counted and the worker's next incarnation recorded on its tracked pod (the commit point: counted once
by pod UID and incarnation, since an agent never reports an older incarnation again), then, after the worker's own
backoff (plan/replacement.py), its agent is told to run it, again on every pass until it does (the order is
idempotent, so an operator killed between recording and telling tells on its next pass). Once the agent runs it,
one Event says so; if it does not within inPlaceTimeoutSeconds after the backoff (or the agent does not answer for a
few seconds), the pod is re-created as today, the failure not counted again. A worker's pod that fails, goes or is
disrupted while its restart is under way is the same incident: replaced, not counted again (abandoned()). The job's
attempt never moves: the other workers and the parameter servers train on. Parameter servers are never restarted in
place (their state is the model)."""

from dataclasses import dataclass, replace
from datetime import UTC, datetime

from trainingjob.children.agent import Gang, GangState
from trainingjob.children.contract import ROLE_WORKER
from trainingjob.children.observe import PodPhase, PodState
from trainingjob.model import Mode, Phase, PodOutcome, TrackedPod, TrainingJobStatus
from trainingjob.plan import classify, finished, replacement, tracking
from trainingjob.plan.classify import TRAINER_FAILED
from trainingjob.plan.transitions import after, seconds_until
from trainingjob.plan.types import Context, Decision, Event

ORDER_POLL_SECONDS = 1.0
SILENT_SECONDS = 5.0  # the worker's agent not answering this long after the backoff: re-create its pod


@dataclass(frozen=True)
class Worker:
    """A worker pod that can restart in place: up, with an agent, its failure not counted; what its agent said."""

    pod: PodState
    tracked: TrackedPod
    gang: Gang | None

    @property
    def failed_anew(self) -> bool:
        """Its agent says its trainer failed, in an incarnation whose failure is not counted yet."""
        gang = self.gang
        return gang is not None and gang.state == GangState.FAILED and gang.attempt >= (self.tracked.incarnation or 1)


def possible(ctx: Context) -> bool:
    return ctx.settings.in_place_restart and ctx.job.spec.mode == Mode.PARAMETER_SERVER


def workers(ctx: Context, status: TrainingJobStatus) -> list[Worker]:
    records = tracking.Records(t for t in status.tracked_pods if t.outcome is None)
    return [
        Worker(p, tracked, ctx.observed.worker_gangs.get(p.name))
        for p in ctx.pods_of(status.current_pods_attempt)
        if p.replica.role == ROLE_WORKER and p.in_place and p.phase == PodPhase.RUNNING and not p.deleting
        if (tracked := records.of(p)) is not None
    ]


def decide(ctx: Context, status: TrainingJobStatus) -> Decision | None:
    """Count the workers whose trainer failed anew, then follow every restart in place under way."""
    if not possible(ctx):
        return None
    failed = [w for w in workers(ctx, status) if w.failed_anew]
    events: tuple[Event, ...] = ()
    if failed:
        counted = _count(ctx, status, failed)
        if counted.final:
            return counted
        status, events = counted.status, counted.events
    pending = [w for w in workers(ctx, status) if w.tracked.restarting_since is not None]
    if not pending:
        return Decision(status, events=events) if failed else None
    return _follow(ctx, status, pending, events)


def _culprit(worker: Worker) -> PodState:
    """The failed trainer as a failed pod (the pod itself is healthy and stays): what the classes and evidence read."""
    assert worker.gang is not None
    failure = worker.gang.failures[0] if worker.gang.failures else None
    finished_at = datetime.fromtimestamp(failure.time, UTC) if failure and failure.time is not None else None
    exit_code = failure.exit_code if failure else None
    return replace(
        worker.pod, phase=PodPhase.FAILED, exit_code=exit_code, finished_at=finished_at, reason=TRAINER_FAILED
    )


def _count(ctx: Context, status: TrainingJobStatus, failed: list[Worker]) -> Decision:
    """Each failure counted once and its next incarnation recorded (the commit point); the job fails instead, none
    of them counted, if one of them cannot be restarted."""
    policy, restarts, events, classes = ctx.job.spec.run_policy, status.restarts, [], []
    incarnations: dict[str, int] = {}
    for worker in failed:
        culprit = _culprit(worker)
        failure = classify.classify(culprit, policy)
        verdict = classify.decide(failure, restarts, policy, classify.describe(culprit))
        if not verdict.restart:
            evidence = classify.last_failure(culprit, failure, ctx.now, status.attempt)
            status = status.model_copy(update={"last_failure": evidence})
            return finished.finish(ctx, status, Phase.FAILED, verdict.reason, verdict.message)
        assert worker.gang is not None
        restarts, incarnations[worker.pod.uid] = classify.counted(restarts, failure), worker.gang.attempt + 1
        classes.append((culprit, failure))
        message = (
            f"{verdict.message} Restarting worker {worker.pod.replica.index}'s trainer in place as its incarnation "
            f"{incarnations[worker.pod.uid]}; its pod stays."
        )
        events.append(Event("Warning", verdict.reason, message))
    culprit, failure = classes[-1]
    pods = tracking.Pods(w.pod for w in failed)
    tracked = [
        t.model_copy(update={"incarnation": incarnations[pod.uid], "restarting_since": ctx.now, "uid": pod.uid})
        if (pod := pods.of(t)) is not None and pod.uid in incarnations
        else t
        for t in status.tracked_pods
    ]
    update = {
        "restarts": restarts,
        "in_place_restarts": status.in_place_restarts + len(classes),
        "last_failure": classify.last_failure(culprit, failure, ctx.now, status.attempt),
        "tracked_pods": tracked,
    }
    status = replacement.replaced(ctx, status.model_copy(update=update), classes)
    return Decision(status, events=tuple(events))


def _follow(ctx: Context, status: TrainingJobStatus, pending: list[Worker], events: tuple[Event, ...]) -> Decision:
    """Each restart under way: done once its agent runs the incarnation; told (again) after the worker's backoff;
    given up for a new pod after the timeout."""
    due_at = {r.pod: r.not_before for r in status.replacements}
    done: set[str] = set()
    orders, delete, requeues, said = [], [], [], list(events)
    for worker in pending:
        tracked, gang = worker.tracked, worker.gang
        incarnation, since = tracked.incarnation or 2, tracked.restarting_since or ctx.now
        due = max(due_at.get(worker.pod.name, since), since)
        deadline = after(due, ctx.settings.in_place_timeout_seconds)
        if gang is not None and gang.attempt >= incarnation and gang.all_running:
            done.add(tracked.uid)
            said.append(_running_again(ctx, worker, incarnation, since))
        elif ctx.now >= deadline or (gang is None and ctx.now >= after(due, SILENT_SECONDS)):
            delete.append(worker)
            said.append(_timed_out(ctx, worker, incarnation))
        elif ctx.now < due:
            requeues.append(seconds_until(ctx, due, ctx.settings.backoff_max_seconds))
        else:
            orders.append((worker.pod.name, incarnation))
            requeues.append(max(seconds_until(ctx, deadline, ORDER_POLL_SECONDS), 0.1))
    kept = [t.model_copy(update={"restarting_since": None}) if t.uid in done else t for t in status.tracked_pods]
    status = status.model_copy(update={"tracked_pods": kept})
    status = abandoned_count(status, [w.pod for w in delete])
    return Decision(
        status,
        delete=tuple(w.pod.name for w in delete),
        events=tuple(said),
        requeue_after=max(min(requeues), 0.1) if requeues else None,
        order_workers=tuple(orders),
    )


def _running_again(ctx: Context, worker: Worker, incarnation: int, since: datetime) -> Event:
    seconds = max((ctx.now - since).total_seconds(), 0.0)
    index = worker.pod.replica.index
    message = (
        f"Worker {index} runs its incarnation {incarnation}, restarted in place {seconds:.1f} s after it was recorded."
    )
    return Event("Normal", "RestartedInPlace", message)


def _timed_out(ctx: Context, worker: Worker, incarnation: int) -> Event:
    seen = f"its agent runs incarnation {worker.gang.attempt}" if worker.gang else "its agent did not answer"
    waited = ctx.settings.in_place_timeout_seconds if worker.gang else SILENT_SECONDS
    message = (
        f"Worker {worker.pod.replica.index}'s restart in place as its incarnation {incarnation} did not run within "
        f"{waited:g} s ({seen}); re-creating its pod (not counted again)."
    )
    return Event("Warning", "InPlaceRestartTimedOut", message)


def abandoned_count(status: TrainingJobStatus, pods: list[PodState]) -> TrainingJobStatus:
    """Pods given up on: their failure was counted when their restart in place was recorded, so their going (or
    failing) is not counted again; the slot is re-created as for a replaced worker."""
    found = tracking.Pods(pods)
    tracked = [
        t.model_copy(update={"outcome": PodOutcome.FAILED, "restarting_since": None, "uid": pod.uid})
        if (pod := found.of(t)) is not None
        else t
        for t in status.tracked_pods
    ]
    return status.model_copy(update={"tracked_pods": tracked})


def abandoned(ctx: Context, status: TrainingJobStatus, found: list[PodState]) -> tuple[list[PodState], Decision | None]:
    """The failure policy's found failures split: the pods of workers whose restart in place was under way (one
    incident seen twice: replaced, not counted again) are decided here; the others are returned."""
    pending = {t.uid for t in status.tracked_pods if t.restarting_since is not None and t.outcome is None}
    again = [p for p in found if p.uid in pending]
    if not again:
        return found, None
    status = abandoned_count(status, again)
    names = ", ".join(p.name for p in again)
    message = (
        f"Pod {names} failed while its worker restarted in place: the same failure; re-creating it (not counted again)."
    )
    delete = tuple(p.name for p in again if not p.deleting and p.phase != PodPhase.UNKNOWN)
    decision = Decision(status, delete=delete, events=(Event("Warning", "InPlaceRestartAbandoned", message),))
    return [p for p in found if p.uid not in pending], decision
