"""A DDP gang whose workers do not all finish: some succeeded, the others run on.

The ranks of a DDP gang run the same loop and end within moments of each other, so the job succeeds when every
worker has (success.py). A worker that succeeds alone leaves the others waiting: in a teardown that does not end,
or in a collective that waits for the rank that left. They get completionGraceSeconds (an operator setting) from
the first worker's finish, then:

    worker 0 succeeded    training is done (worker 0 records the result and the final checkpoint): the job
                          succeeds, naming the workers that did not finish; cleanPodPolicy stops them
    worker 0 runs on      the gang cannot finish: the attempt is restarted from the newest checkpoint, counted as
                          a stall (the class of a gang that makes no progress)

Parameter-server workers finish their shares independently: this applies to DDP jobs only."""

from dataclasses import replace
from datetime import timedelta

from trainingjob.model import Mode, Phase, TrainingJobStatus
from trainingjob.plan import failure, finished, result, tracking
from trainingjob.plan.slots import slots
from trainingjob.plan.transitions import seconds_until
from trainingjob.plan.types import Context, Decision

REASON = "WorkersDidNotFinish"


def decide(ctx: Context, status: TrainingJobStatus) -> Decision | None:
    if ctx.job.spec.mode != Mode.DDP or status.phase != Phase.RUNNING:
        return None
    workers = slots(ctx, status)
    running = [s.pod for s in workers if not s.done and s.pod is not None and not s.pod.is_finished]
    first = tracking.first_success(status)
    if not running or first is None or not any(s.done for s in workers):
        return None
    grace = ctx.settings.completion_grace_seconds
    ends = first + timedelta(seconds=grace)
    if ctx.now < ends:
        return Decision(status, requeue_after=seconds_until(ctx, ends, grace))
    names = ", ".join(str(p.replica.index) for p in running)
    what = f"worker(s) {names} ran on for {grace:g} s (completionGraceSeconds) after a worker finished"
    if workers[0].done:
        message = f"Worker 0 finished training; {what}, and were stopped."
        decision = finished.finish(ctx, status, Phase.SUCCEEDED, "JobSucceeded", message)
        return replace(decision, status=result.with_result(decision.status))
    return failure.stalled(ctx, status, running[0], f"Worker 0 did not finish: {what}", REASON)
