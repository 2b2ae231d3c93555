"""When to read a sweep trial's progress next: just after its next evaluation, not at the next resync. A trial's
evaluation reaches the sweep as a change of its job's status (the trials' watch wakes the sweep's reconcile),
and its job's reconcile is what reads rank 0's report: read once a resync period (a minute by default), a trial
evaluating every 10 s ran six more evaluations before a pruning decision could reach it. Read just after each
evaluation (when its step is due at the trainer's recent step rate, as its etaSeconds says), the sweep judges it,
and a pruned trial's job is suspended, within about a second and a pass: before its next evaluation.

A job that is not a sweep's trial, has no evaluations, is not running, or has no step rate yet is read as before."""

from datetime import datetime

from trainingjob.model import Phase, TrainingJob, TrainingJobStatus
from trainingjob.sweep.trials import SWEEP_LABEL

EVALUATION_MARGIN_SECONDS = 1.0  # after the step is due: the evaluation pass itself, and the rate's drift
MIN_READ_SECONDS = 2.0  # never read a trial's progress more often than this


def next_read(job: TrainingJob, status: TrainingJobStatus, now: datetime) -> float | None:
    """Seconds until a sweep trial's next evaluation is due and done (plus a margin), or None (nothing to time)."""
    trainer, progress = job.spec.trainer, status.progress
    every = trainer.eval_every_steps if trainer is not None else None
    if SWEEP_LABEL not in (job.metadata.labels or {}) or not every or status.phase != Phase.RUNNING:
        return None
    if progress is None or not progress.total_steps or progress.estimated_completion_time is None:
        return None
    steps_left = progress.total_steps - progress.step
    seconds_left = (progress.estimated_completion_time - now).total_seconds()
    if steps_left <= 0 or seconds_left <= 0:
        return None
    due = min((progress.step // every + 1) * every, progress.total_steps)
    wait = (due - progress.step) * seconds_left / steps_left + EVALUATION_MARGIN_SECONDS
    return max(wait, MIN_READ_SECONDS)
