"""Whether to look for room for a shrunk elastic job's workers this reconcile, and the count seen (Observed.spare):
only for a DDP job running fewer workers than replicas, once the resize interval after its last resize is over
(plan/elastic.py would not grow it sooner), so listing the nodes costs nothing for every other job."""

from datetime import datetime, timedelta

from trainingjob.children.contract import ROLE_WORKER
from trainingjob.children.naming import Replica
from trainingjob.children.specs import pod_manifest, worker_count
from trainingjob.kube.ports import Room
from trainingjob.model import Mode, TrainingJob


def spare(room: Room | None, job: TrainingJob, now: datetime, interval: float) -> int:
    """Further worker pods that fit now, looked for when the job could grow; 0 otherwise."""
    scale, workers = job.status.scale if job.status else None, job.spec.workers
    if room is None or scale is None or job.spec.mode != Mode.DDP or workers.fewest_replicas >= workers.replicas:
        return 0
    missing = workers.replicas - worker_count(job)
    if missing <= 0 or (scale.last_resize_time and now < scale.last_resize_time + timedelta(seconds=interval)):
        return 0
    return room.spare(
        pod_manifest(job, str(getattr(job.metadata, "uid", "") or ""), Replica(ROLE_WORKER, 0), 1), missing
    )
