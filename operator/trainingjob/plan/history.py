"""status.history follows the status: record(before, after, now) notes what changed between a reconcile's first
and last status: an attempt that began, got its pods, ran or ended (what its rank 0 reported of it); a pod failure;
a node's refusal of a pod (status.replacements[].refused); a checkpoint; a point of the loss curve or an
evaluation. Nothing new, nothing written: the history is unchanged
when the status is. Attempts past MAX_ATTEMPTS leave the list for `earlier`, the goodput split's sum of them."""

import itertools
from collections.abc import Sequence
from datetime import datetime
from typing import TypeVar

from trainingjob.children.goodput import earlier_attempts
from trainingjob.model import (
    AttemptOutcome,
    AttemptRecord,
    ConditionType,
    EvaluationPoint,
    FailureRecord,
    History,
    MetricPoint,
    Phase,
    Progress,
    RefusalRecord,
    TrainingJobStatus,
)
from trainingjob.model.history import (
    MAX_ATTEMPTS,
    MAX_CHECKPOINTS,
    MAX_EVALUATIONS,
    MAX_FAILURES,
    MAX_POINTS,
    MAX_REFUSALS,
)
from trainingjob.plan.resize import RESIZED
from trainingjob.plan.transitions import condition_of

P = TypeVar("P", MetricPoint, EvaluationPoint)


def record(
    before: TrainingJobStatus, after: TrainingJobStatus, now: datetime, created: datetime | None = None
) -> TrainingJobStatus:
    """`after` with its history brought up to date; `after` itself when nothing happened worth keeping. `created`:
    the job's creation, where the goodput split of attempts dropped from the list begins."""
    old = before.history or History()
    history = _kept(_attempts(old, before, after, now), created, now)
    history = _failures(history, before, after)
    history = _refusals(history, after, now)
    history = _checkpoints(history, after)
    history = _curves(history, after, now)
    if history == old:
        return after
    return after.model_copy(update={"history": history})


def _attempts(history: History, before: TrainingJobStatus, after: TrainingJobStatus, now: datetime) -> History:
    """Close the running attempt if it ended, open the next one, note its pods and its running. A record's times
    never go backwards, even when the operator's clock does."""
    attempts = list(history.attempts)
    if attempts and attempts[-1].end_time is None:
        ended = _ending(attempts[-1], before, after)
        if ended is not None:
            outcome, reason = ended
            end = max(now, _latest(attempts[-1]))
            attempts[-1] = attempts[-1].model_copy(update={"end_time": end, "outcome": outcome, "reason": reason})
    stopped = after.phase in (Phase.SUSPENDED, Phase.SUCCEEDED, Phase.FAILED)
    if after.attempt > 0 and not stopped and (not attempts or attempts[-1].end_time is not None):
        resumed = after.last_checkpoint.step if after.last_checkpoint is not None else None
        start = max(now, _latest(attempts[-1])) if attempts else now
        in_place = True if after.pods_attempt is not None else None
        record = AttemptRecord(attempt=after.attempt, start_time=start, resumed_from_step=resumed, in_place=in_place)
        attempts.append(record)
    if attempts and attempts[-1].end_time is None:
        current = attempts[-1]
        if current.pods_time is None and after.tracked_pods:
            current = current.model_copy(update={"pods_time": max(now, _latest(current))})
        if current.running_time is None and after.phase == Phase.RUNNING:
            current = current.model_copy(update={"running_time": max(now, _latest(current))})
        if current.in_place and after.pods_attempt is None:  # it fell back to pods of its own
            current = current.model_copy(update={"in_place": False})
        workers, desired = _shrunk(after)
        if (current.workers, current.desired_workers) != (workers, desired):
            current = current.model_copy(update={"workers": workers, "desired_workers": desired})
        attempts[-1] = current
    return history.model_copy(update={"attempts": _reported(attempts, after.progress, now)})


def _shrunk(status: TrainingJobStatus) -> tuple[int | None, int | None]:
    """The workers the job runs with and those it asks for, when fewer (status.scale); else neither."""
    scale = status.scale
    if scale is None or scale.current >= scale.desired:
        return None, None
    return scale.current, scale.desired


def _kept(history: History, created: datetime | None, now: datetime) -> History:
    """The newest MAX_ATTEMPTS attempts; those dropped are summed into `earlier` for the goodput split."""
    dropped = len(history.attempts) - MAX_ATTEMPTS
    if dropped <= 0:
        return history
    earlier = earlier_attempts(history, dropped, created, now)
    return history.model_copy(update={"attempts": history.attempts[dropped:], "earlier": earlier})


def _reported(attempts: list[AttemptRecord], progress: Progress | None, now: datetime) -> list[AttemptRecord]:
    """The newest record of the attempt that made rank 0's last report (its last words arrive as it ends) with what
    the report says of it: where it resumed from, its first step's time (kept once known, within the attempt), how
    far the job has got, its heartbeat and its checkpoint stall (none of them going back)."""
    number = progress.attempt if progress is not None else None
    index = next((i for i in reversed(range(len(attempts))) if attempts[i].attempt == number), None)
    if progress is None or index is None:
        return attempts
    record = attempts[index]
    update: dict[str, object] = {"last_step": max(progress.step, record.last_step or 0)}
    if progress.resumed_from_step is not None:  # the trainer knows better than the newest checkpoint we saw
        update["resumed_from_step"] = progress.resumed_from_step
    if record.first_step_time is None and progress.first_step_time is not None:
        latest = max(min(now, record.end_time or now), record.start_time)
        update["first_step_time"] = min(max(progress.first_step_time, record.start_time), latest)
    heartbeat = min(progress.last_heartbeat_time, now) if progress.last_heartbeat_time is not None else None
    if heartbeat is not None and (record.last_heartbeat_time is None or heartbeat > record.last_heartbeat_time):
        update["last_heartbeat_time"] = heartbeat
    stall = progress.checkpoint_stall_seconds
    if stall is not None and stall > (record.checkpoint_stall_seconds or 0.0):
        update["checkpoint_stall_seconds"] = stall
    changed = record.model_copy(update=update)
    return attempts if changed == record else [*attempts[:index], changed, *attempts[index + 1 :]]


def _latest(record: AttemptRecord) -> datetime:
    return max(t for t in (record.start_time, record.pods_time, record.running_time, record.end_time) if t)


def _ending(
    current: AttemptRecord, before: TrainingJobStatus, after: TrainingJobStatus
) -> tuple[AttemptOutcome, str | None] | None:
    """How the running attempt ended between `before` and `after`, or None while it goes on."""
    failure = after.last_failure
    failed_now = failure is not None and failure != before.last_failure and failure.attempt == current.attempt
    failure_class = failure.failure_class.value if failed_now and failure is not None else None
    if after.phase == Phase.SUCCEEDED:
        return AttemptOutcome.SUCCEEDED, None
    if after.phase == Phase.FAILED:
        condition = condition_of(after, ConditionType.FAILED)
        return AttemptOutcome.FAILED, failure_class or (condition.reason if condition else None)
    if after.phase == Phase.SUSPENDED:
        return AttemptOutcome.SUSPENDED, None
    if after.attempt != current.attempt:
        if failure_class:
            return AttemptOutcome.FAILED, failure_class
        restarting = condition_of(after, ConditionType.RESTARTING)
        resized = restarting is not None and restarting.reason == RESIZED  # an elastic job's resize (plan/resize.py)
        return AttemptOutcome.REPLACED, RESIZED if resized else None
    return None


def _failures(history: History, before: TrainingJobStatus, after: TrainingJobStatus) -> History:
    failure = after.last_failure
    if failure is None or failure == before.last_failure:
        return history
    entry = FailureRecord(
        time=failure.time,
        attempt=failure.attempt,
        pod=failure.pod,
        failure_class=failure.failure_class,
        exit_code=failure.exit_code,
        reason=failure.reason,
        consequences=failure.consequences,
    )
    if history.failures and history.failures[-1] == entry:
        return history
    return history.model_copy(update={"failures": [*history.failures, entry][-MAX_FAILURES:]})


def _refusals(history: History, after: TrainingJobStatus, now: datetime) -> History:
    """Each slot's stretch of node refusals as one record (its pod and first refusal), brought up to date while
    the refusals go on and kept after the slot's pod runs; the MAX_REFUSALS that began last, in that order."""
    records = list(history.refusals)
    for slot in after.replacements:
        refusal = slot.refused
        if refusal is None:
            continue
        said = {"count": refusal.count, "node": refusal.node, "reason": refusal.reason}
        index = next((i for i, r in enumerate(records) if (r.pod, r.since) == (slot.pod, refusal.since)), None)
        if index is None:
            attempt = max(after.current_pods_attempt, 1)
            records.append(RefusalRecord(pod=slot.pod, attempt=attempt, since=refusal.since, time=now, **said))
        elif (records[index].count, records[index].node, records[index].reason) != tuple(said.values()):
            records[index] = records[index].model_copy(update={"time": max(now, records[index].time), **said})
    records = sorted(records, key=lambda r: (r.since, r.pod))[-MAX_REFUSALS:]  # the same list when nothing changed
    return history if records == history.refusals else history.model_copy(update={"refusals": records})


def _checkpoints(history: History, after: TrainingJobStatus) -> History:
    """A new last checkpoint joins the list (without the steps kept beside it: status.lastCheckpoint says which of
    them are still on the volume). One already there (its step and folder: an attempt that resumed from it says so
    with the folder's time) is not listed again."""
    checkpoint = after.last_checkpoint.model_copy(update={"kept": None}) if after.last_checkpoint else None
    if checkpoint is None or any((c.step, c.path) == (checkpoint.step, checkpoint.path) for c in history.checkpoints):
        return history
    return history.model_copy(update={"checkpoints": [*history.checkpoints, checkpoint][-MAX_CHECKPOINTS:]})


def _curves(history: History, after: TrainingJobStatus, now: datetime) -> History:
    progress = after.progress
    if progress is None:
        return history
    if progress.step > 0 and (progress.loss is not None or progress.samples_per_second is not None):
        point = MetricPoint(
            step=progress.step, time=now, loss=progress.loss, samples_per_second=progress.samples_per_second
        )
        points, every = added(history.points, history.point_every_steps, point, MAX_POINTS)
        history = history.model_copy(update={"points": points, "point_every_steps": every})
    if progress.metrics and progress.metrics_step is not None:
        evaluation = EvaluationPoint(step=progress.metrics_step, time=now, metrics=progress.metrics)
        evaluations, every = added(history.evaluations, history.evaluation_every_steps, evaluation, MAX_EVALUATIONS)
        history = history.model_copy(update={"evaluations": evaluations, "evaluation_every_steps": every})
    return history


def added(series: Sequence[P], every: int, point: P, limit: int) -> tuple[list[P], int]:
    """`series` with `point`: a point at or before the last step replaces the points from its step on (a resume
    from a checkpoint redoes those steps); one closer than `every` steps to the last is left out; past `limit`
    points every other one goes and the spacing doubles, or grows to the closest two points kept if they are
    further apart (points arrive as reconciles see them, often further apart than `every`): new points are then
    no denser than the old, and the series stays even over the whole run."""
    if series and series[-1].step == point.step:
        return list(series), every
    kept = [p for p in series if p.step < point.step]
    if len(kept) == len(series) and kept and point.step - kept[-1].step < every:
        return kept, every
    kept.append(point)
    while len(kept) > limit:
        kept = kept[::-2][::-1]  # the newest point stays (and the first, for an even limit)
        every = max(every * 2, min(b.step - a.step for a, b in itertools.pairwise(kept)))
    return kept, every
