"""The delay before a restart: exponential in the failures of a crash loop, not in every failure the job ever had.

A failure starts the next attempt after the base delay (backoffBaseSeconds), doubled for each failure right before
it that saved nothing (it ended without a checkpoint newer than the one it resumed from), at most backoffMaxSeconds.
An attempt that moved the newest checkpoint forward ends a crash loop, as a container that ran for ten minutes
resets the kubelet's CrashLoopBackOff: a job that trains for days between failures restarts after the base delay
each time, not after the maximum from its sixth failure on. A job without checkpoints never saves anything, so its
every failure in a row doubles the delay, as before.

A restart in place after an attempt that moved the newest checkpoint forward waits for nothing: the delay exists to
keep a crash loop from hammering the cluster and to give a sick node time, and neither applies to a gang that was
training and restarts inside its own healthy pods (no pod, no scheduling, no apiserver load beyond the record). The
whole gang waits out a backoff, so the base delay (10 s) is 17% of the time between failures a minute apart. Its
next failure, if it saved nothing, is a crash loop's and waits the base delay, doubling from there.
"""

from trainingjob.model import TrainingJobStatus
from trainingjob.model.history import AttemptOutcome, AttemptRecord
from trainingjob.plan.types import Context


def backoff_seconds(ctx: Context, status: TrainingJobStatus) -> float:
    """The delay after the last failure: base, doubled for each failure of the crash loop before it, at most max."""
    delay = ctx.settings.backoff_base_seconds * 2 ** min(max(failures_in_a_row(status) - 1, 0), 32)
    return float(min(delay, ctx.settings.backoff_max_seconds))


def in_place_backoff_seconds(ctx: Context, status: TrainingJobStatus) -> float:
    """The delay before a restart in place: none after an attempt that saved a newer checkpoint than it resumed
    from, the crash loop's backoff otherwise."""
    return 0.0 if last_failure_saved(status) else backoff_seconds(ctx, status)


def failures_in_a_row(status: TrainingJobStatus) -> int:
    """The last failure and the failures right before it, back to (not counting) one that saved a newer checkpoint
    than it resumed from or an attempt that did not fail; the restarts counted so far when the history does not
    have the last failure's attempt."""
    records, index = _last_failed_record(status)
    if index is None:
        return status.restarts.total
    streak = 0
    for i in range(index, -1, -1):
        if i < index and records[i].outcome != AttemptOutcome.FAILED:
            break
        streak += 1
        if _saved(status, records, i):
            break
    return streak


def last_failure_saved(status: TrainingJobStatus) -> bool:
    """Whether the attempt that failed last moved the newest checkpoint forward (False when the history does not
    have it)."""
    records, index = _last_failed_record(status)
    return index is not None and _saved(status, records, index)


def _last_failed_record(status: TrainingJobStatus) -> tuple[list[AttemptRecord], int | None]:
    """The history's records and the index of the last failure's attempt among them."""
    failure, records = status.last_failure, status.history.attempts if status.history else []
    index = next(
        (i for i in range(len(records) - 1, -1, -1) if failure and records[i].attempt == failure.attempt), None
    )
    return records, index


def _saved(status: TrainingJobStatus, records: list[AttemptRecord], i: int) -> bool:
    """Whether attempt record `i` left a newer checkpoint than the one it resumed from: what the next attempt resumed
    from, or for the last record the newest checkpoint."""
    newest = status.last_checkpoint.step if status.last_checkpoint is not None else 0
    after = records[i + 1].resumed_from_step if i + 1 < len(records) else newest
    return (after or 0) > (records[i].resumed_from_step or 0)
