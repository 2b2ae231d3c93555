"""Parameter-server workers that restart in place (plan/worker_in_place.py): reading each worker's agent (a gang of
one) while its pod is not ready or its restart is under way, and telling it to run its next incarnation."""

import logging
from collections.abc import Sequence

from trainingjob.children.agent import Gang
from trainingjob.children.contract import ROLE_WORKER
from trainingjob.children.observe import Observed, PodPhase
from trainingjob.kube.ports import Cluster, Manifest
from trainingjob.model import Mode, TrainingJob, TrainingJobStatus

log = logging.getLogger(__name__)


def worker_gangs(cluster: Cluster, job: TrainingJob, observed: Observed, pods: Sequence[Manifest]) -> dict[str, Gang]:
    """Pod name -> its agent's account, for the workers whose pod is up but not ready (the agent's readiness
    probe fails while its trainer has failed) or whose restart in place is under way; nothing in other modes. A
    ready worker costs no read: the kubelet's Ready flip is the signal."""
    if job.spec.mode != Mode.PARAMETER_SERVER:
        return {}
    status = job.status or TrainingJobStatus()
    pending = {t.uid for t in status.tracked_pods if t.restarting_since is not None}
    manifests = {str(p["metadata"].get("uid", "")): p for p in pods}
    asked = [
        p
        for p in observed.of_attempt(status.current_pods_attempt)
        if p.replica.role == ROLE_WORKER
        and p.in_place
        and p.phase == PodPhase.RUNNING
        and not p.deleting
        and (not p.ready or p.uid in pending)
        and p.uid in manifests
    ]
    said = {p.name: cluster.gang(manifests[p.uid]) for p in asked}
    return {name: gang for name, gang in said.items() if gang is not None}


def order_workers(cluster: Cluster, job: Manifest, orders: Sequence[tuple[str, int]], pods: Sequence[Manifest]) -> None:
    """Tell each worker's agent to run its next incarnation, signed with the job's key (after the status that
    records the restart is written: the order is idempotent, so one lost or repeated changes nothing)."""
    by_name = {str(p["metadata"].get("name")): p for p in pods}
    metadata = job["metadata"]
    for pod, incarnation in orders:
        if pod in by_name:
            told = cluster.order(by_name[pod], str(metadata.get("uid", "")), incarnation)
            job_name = f"{metadata['namespace']}/{metadata['name']}"
            log.info("%s: told %s's agent to run incarnation %d: %s", job_name, pod, incarnation, told)
