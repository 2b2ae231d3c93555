"""The result of a Succeeded job, kept in status.result to compare runs by: its last step and loss, its final
evaluation metrics, how long it ran and its last checkpoint. Only success writes one: a failed job's last
metrics are no result (they stay in status.progress, with the step they were computed at), and a suspended job
has not ended."""

from trainingjob.model import TrainingJobStatus, TrainingResult

_REPORTED = {"step", "total_steps", "loss", "metrics", "metrics_step"}  # what a result takes from the progress


def duration_seconds(status: TrainingJobStatus) -> int | None:
    """Seconds from startTime to completionTime, the time spent suspended left out."""
    if status.start_time is None or status.completion_time is None:
        return None
    elapsed = int((status.completion_time - status.start_time).total_seconds())
    return max(elapsed - status.suspended_seconds, 0)


def result_of(status: TrainingJobStatus) -> TrainingResult:
    """The result of a job that has just finished, from its last progress report and checkpoint."""
    reported = status.progress.model_dump(include=_REPORTED) if status.progress else {}
    return TrainingResult.model_validate(
        {**reported, "duration_seconds": duration_seconds(status), "checkpoint": status.last_checkpoint}
    )


def with_result(status: TrainingJobStatus) -> TrainingJobStatus:
    return status.model_copy(update={"result": result_of(status)})
