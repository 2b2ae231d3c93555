"""status.goodput (children/goodput.py computes it) kept current without a status write of its own: recomputed on a
pass that writes the status anyway, or once the one written is REFRESH_SECONDS old (a running job's parts grow
with the clock), and never rewritten when only its time would change (a finished job's stays as it is). A
Succeeded job's result keeps the goodput it succeeded with."""

from datetime import datetime

from trainingjob.children.goodput import goodput
from trainingjob.model import Goodput, Phase, TrainingJobStatus

REFRESH_SECONDS = 60.0  # the operator's default resync: a running job's status is written about once a minute anyway


def refreshed(
    before: TrainingJobStatus, after: TrainingJobStatus, created: datetime | None, now: datetime
) -> TrainingJobStatus:
    """`after` with its goodput brought up to date when it is due, and a Succeeded job's result holding it."""
    kept, fresh = after.goodput, goodput(after, created, now)
    due = kept is None or after != before or (now - kept.time).total_seconds() >= REFRESH_SECONDS
    if due and (kept is None or not _same(kept, fresh)):
        after = after.model_copy(update={"goodput": fresh})
    return _in_result(after)


def _same(old: Goodput, new: Goodput) -> bool:
    """The same parts and ratio, whenever each was computed."""
    return old.model_copy(update={"time": new.time}) == new


def _in_result(status: TrainingJobStatus) -> TrainingJobStatus:
    """A Succeeded job's result takes the goodput it succeeded with, once."""
    result = status.result
    if status.phase != Phase.SUCCEEDED or result is None or result.goodput is not None or status.goodput is None:
        return status
    return status.model_copy(update={"result": result.model_copy(update={"goodput": status.goodput})})
