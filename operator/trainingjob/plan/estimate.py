"""Progress for people: the percent of the run done, and when it should end on the operator's clock. A job
that is not running on (finished) or not now (suspended) has no estimated completion time."""

from datetime import datetime

from trainingjob.model import Progress, TrainingJobStatus


def percent(step: int, total: int | None) -> int | None:
    """Whole percent of `total` steps done, rounded down (100 only once all are done); None without a total."""
    if not total:
        return None
    return min(step * 100 // total, 100)


def for_people(progress: Progress) -> Progress:
    """The progress with its percent done, and its estimated completion to the second (no estimate is finer)."""
    estimate = progress.estimated_completion_time
    update = {
        "percent": percent(progress.step, progress.total_steps),
        "estimated_completion_time": estimate.replace(microsecond=0) if estimate else None,
    }
    return progress.model_copy(update=update)


def on_our_clock(progress: Progress, now: datetime) -> Progress:
    """A report whose heartbeat is ahead of `now` (a trainer's clock ahead of ours): its estimated completion and
    its first step's time move back as far (the first step never later than now). The heartbeat stays as the
    trainer said it: it only tells one report from the next (staleness is lastChangeTime's, plan/progress.py)."""
    heartbeat, estimate = progress.last_heartbeat_time, progress.estimated_completion_time
    first = progress.first_step_time
    ahead = heartbeat - now if heartbeat is not None and heartbeat > now else None
    if ahead is None:
        return progress if first is None or first <= now else progress.model_copy(update={"first_step_time": now})
    return progress.model_copy(
        update={
            "estimated_completion_time": estimate - ahead if estimate else None,
            "first_step_time": min(first - ahead, now) if first else None,
        }
    )


def stopped(status: TrainingJobStatus) -> TrainingJobStatus:
    """The status without an estimated completion time: the job does not run on, or not now."""
    progress = status.progress
    if progress is None or progress.estimated_completion_time is None:
        return status
    return status.model_copy(update={"progress": progress.model_copy(update={"estimated_completion_time": None})})
