"""Checkpoints paced to the failure rate (checkpoint.everySteps: Auto), the operator's half.

The trainer measures what a save stalls training; only the operator knows how often the job fails. It hands each
attempt's trainer the job's record in one variable, TJ_CHECKPOINT_PACING (a JSON object): restarts so far, running
seconds so far, the prior mean time between failures of a job that has not run yet, and the interval's bounds. The
trainer estimates the mean time between failures as it goes: running seconds / restarts, the job's own record, or
before its first restart prior + running seconds (it has run that long without failing). It checkpoints every
sqrt(2 x save stall x MTBF) seconds (Young/Daly), held within the bounds. Rank 0 reports what it chose
(checkpointPacing), which the progress report's reader turns into status.progress.checkpointPacing with `reason`.

Every job with a checkpoint volume gets the variable: a fixed interval stays in force, and its status shows what
Auto would choose beside it.
"""

import json
import math

from trainingjob.model import TrainingJobStatus
from trainingjob.model.policy import CheckpointSpec
from trainingjob.model.status import CheckpointPacing


def running_seconds(status: TrainingJobStatus) -> float:
    """The job's time with pods (its wall time less queued and suspended), as of its last goodput."""
    goodput = status.goodput
    if goodput is None:
        return 0.0
    return float(max(goodput.wall_seconds - goodput.queued_seconds - goodput.suspended_seconds, 0))


def pacing_variable(
    checkpoint: CheckpointSpec | None, status: TrainingJobStatus, prior: float, bounds: tuple[float, float]
) -> str | None:
    """TJ_CHECKPOINT_PACING for the job's next attempt; None without a checkpoint volume."""
    if checkpoint is None:
        return None
    record = {
        "auto": checkpoint.auto,
        "failures": status.restarts.total,
        "runningSeconds": running_seconds(status),
        "priorSeconds": prior,
        "minSeconds": bounds[0],
        "maxSeconds": bounds[1],
    }
    return json.dumps(record, sort_keys=True, separators=(",", ":"))


def span(seconds: float) -> str:
    """A duration for people: 0.042 s, 12 s, 8.5 min, 6.1 h."""
    if seconds < 10:
        return f"{seconds:.2g} s" if seconds < 1 else f"{seconds:.1f} s"
    if seconds < 600:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def reason(pacing: CheckpointPacing) -> str:
    """Why the interval is what it is, in one sentence."""
    save, mtbf = pacing.save_seconds, pacing.mtbf_seconds
    if save is None or mtbf is None:
        if not pacing.auto:
            return "fixed interval; what Auto would choose shows after the first save"
        first = f" after {span(pacing.interval_seconds)}" if pacing.interval_seconds is not None else ""
        return f"Auto: the first checkpoint{first} measures what a save stalls training"
    formula = f"sqrt(2 x {span(save)} per save x {span(mtbf)} between failures) = {span(math.sqrt(2 * save * mtbf))}"
    held = {"min": "the operator's minimum", "max": "the operator's maximum"}.get(pacing.bound or "")
    chosen = pacing.optimal_seconds if pacing.optimal_seconds is not None else math.sqrt(2 * save * mtbf)
    if not pacing.auto:
        return f"fixed interval; Auto would checkpoint every {span(chosen)}: {formula}" + (
            f", held at {held}" if held else ""
        )
    if held:
        return f"Auto: every {span(chosen)}, {held}; Young/Daly gives {formula}"
    return f"Auto: every {span(chosen)}, Young/Daly: {formula}"
