"""Parameter-server workers replaced alone, each on a backoff of its own (status.replacements): one worker's failure
never delays another's replacement, however often the cluster takes workers away. A worker's replacement waits
backoffBaseSeconds after a disruption (preemption, eviction, node loss: not the job's fault, so it never grows
the delay), and after a failure of the job's own the base doubled for each such failure of
that worker in this attempt, at most backoffMaxSeconds. A job below its replica count so replaces each missing worker
within its own backoff. Whole-attempt restarts keep the job's backoff (plan/backoff.py). A pod a node refused to
admit is re-created alone the same way, in any mode (plan/refused.py)."""

from collections.abc import Sequence
from datetime import datetime

from trainingjob.children.observe import PodState
from trainingjob.model import FailureClass, SlotBackoff, TrainingJobStatus
from trainingjob.plan.slots import Slot
from trainingjob.plan.transitions import after
from trainingjob.plan.types import Context


def delay(ctx: Context, failures: int) -> float:
    """A worker's delay after its `failures`-th failure of the job's own (0: after a disruption)."""
    seconds = ctx.settings.backoff_base_seconds * 2 ** min(max(failures - 1, 0), 32)
    return float(min(seconds, ctx.settings.backoff_max_seconds))


def replaced(
    ctx: Context, status: TrainingJobStatus, failed: Sequence[tuple[PodState, FailureClass]]
) -> TrainingJobStatus:
    """The status with each failed worker's own not-before moment (the slots of earlier attempts forgotten)."""
    current = {replica.pod_name(ctx.name, status.current_pods_attempt) for replica in ctx.slots}
    kept = {r.pod: r for r in status.replacements if r.pod in current}
    for pod, failure in failed:
        own = failure != FailureClass.DISRUPTION
        failures = (kept[pod.name].failures if pod.name in kept else 0) + own
        moment = after(ctx.now, delay(ctx, failures if own else 0))
        slot = kept.get(pod.name) or SlotBackoff(pod=pod.name, not_before=moment)
        kept[pod.name] = slot.model_copy(update={"not_before": moment, "failures": failures})
    return status.model_copy(update={"replacements": sorted(kept.values(), key=lambda r: r.pod)})


def alone(status: TrainingJobStatus) -> bool:
    """Whether the last failure was a worker replaced alone in this attempt: its own backoff applies, not the job's."""
    failure = status.last_failure
    if failure is None or failure.attempt != status.attempt:
        return False
    return any(r.pod == failure.pod for r in status.replacements)


def due(ctx: Context, status: TrainingJobStatus, missing: Sequence[Slot]) -> tuple[list[Slot], datetime | None]:
    """The missing slots whose own backoff is over, and when the next of the others' ends (None: none waits)."""
    moments = {r.pod: r.not_before for r in status.replacements}
    ready = [s for s in missing if s.name not in moments or moments[s.name] <= ctx.now]
    waiting = [moments[s.name] for s in missing if s.name in moments and moments[s.name] > ctx.now]
    return ready, min(waiting, default=None)


def next_due(ctx: Context, status: TrainingJobStatus) -> datetime | None:
    """When the next worker's backoff ends, if one has not yet."""
    return min((r.not_before for r in status.replacements if r.not_before > ctx.now), default=None)
