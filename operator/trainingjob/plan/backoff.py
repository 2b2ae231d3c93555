"""The delay before a restart: exponential in the failures of a crash loop, not in every failure the job ever had.

A failure starts the next attempt after the base delay (backoffBaseSeconds), doubled for each failure right before
it that saved nothing (it ended without a checkpoint newer than the one it resumed from), at most backoffMaxSeconds.
An attempt that moved the newest checkpoint forward ends a crash loop, as a container that ran for ten minutes
resets the kubelet's CrashLoopBackOff: a job that trains for days between failures restarts after the base delay
each time, not after the maximum from its sixth failure on. A job without checkpoints never saves anything, so its
every failure in a row doubles the delay, as before.
"""

from trainingjob.model import TrainingJobStatus
from trainingjob.model.history import AttemptOutcome, AttemptRecord
from trainingjob.plan.types import Context


def backoff_seconds(ctx: Context, status: TrainingJobStatus) -> float:
    """The delay after the last failure: base, doubled for each failure of the crash loop before it, at most max."""
    delay = ctx.settings.backoff_base_seconds * 2 ** min(max(failures_in_a_row(status) - 1, 0), 32)
    return float(min(delay, ctx.settings.backoff_max_seconds))


def failures_in_a_row(status: TrainingJobStatus) -> int:
    """The last failure and the failures right before it, back to (not counting) one that saved a newer checkpoint
    than it resumed from or an attempt that did not fail; the restarts counted so far when the history does not
    have the last failure's attempt."""
    failure, records = status.last_failure, status.history.attempts if status.history else []
    index = next(
        (i for i in range(len(records) - 1, -1, -1) if failure and records[i].attempt == failure.attempt), None
    )
    if index is None:
        return status.restarts.total
    newest = status.last_checkpoint.step if status.last_checkpoint is not None else 0
    streak = 0
    for i in range(index, -1, -1):
        if i < index and records[i].outcome != AttemptOutcome.FAILED:
            break
        streak += 1
        saved_after = records[i + 1].resumed_from_step if i + 1 < len(records) else newest
        if _saved(records[i], saved_after):
            break
    return streak


def _saved(record: AttemptRecord, checkpoint_after: int | None) -> bool:
    """Whether the attempt left a newer checkpoint than the one it resumed from."""
    return (checkpoint_after or 0) > (record.resumed_from_step or 0)
