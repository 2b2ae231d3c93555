"""Which pods' logs are evidence: the uncounted failures of the current attempt, a few at most, so the
last lines of a failed rank land in status.lastFailure without reading every pod's log on every pass."""

from trainingjob.children.observe import Observed, PodPhase
from trainingjob.model import TrainingJobStatus
from trainingjob.plan import tracking

MOST = 3


def wanted(status: TrainingJobStatus | None, observed: Observed) -> list[str]:
    status = status or TrainingJobStatus()
    counted = tracking.counted_uids(status)
    failed = [p for p in observed.of_attempt(status.current_pods_attempt) if p.phase == PodPhase.FAILED]
    return [p.name for p in failed if p.uid not in counted][:MOST]
