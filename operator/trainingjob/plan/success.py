"""Success: every worker's pod of the current attempt succeeded (seen now, or recorded before its pod went).
Parameter servers do not need to; cleanPodPolicy then stops them. The job's result is recorded as it succeeds."""

from dataclasses import replace

from trainingjob.children.contract import ROLE_WORKER
from trainingjob.model import Phase, TrainingJobStatus
from trainingjob.plan import finished, result
from trainingjob.plan.slots import slots
from trainingjob.plan.types import Context, Decision


def decide(ctx: Context, status: TrainingJobStatus) -> Decision | None:
    workers = [s for s in slots(ctx, status) if s.replica.role == ROLE_WORKER]
    if not workers or not all(s.done for s in workers):
        return None
    message = f"All {len(workers)} workers finished successfully."
    decision = finished.finish(ctx, status, Phase.SUCCEEDED, "JobSucceeded", message)
    return replace(decision, status=result.with_result(decision.status))
