"""One reconcile of one job: observe the cluster once, plan, write the status, then act on the plan."""

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from pydantic import ValidationError

from trainingjob.conditions import set_condition
from trainingjob.contract import ROLE_WORKER
from trainingjob.model import CheckpointStatus, ConditionType, Phase, Progress, TrainingJob, TrainingJobStatus
from trainingjob.naming import CONTAINER_NAME, Replica
from trainingjob.observe import Observed, PodPhase, observe
from trainingjob.plan import Event, Settings, plan

log = logging.getLogger(__name__)
Manifest = dict[str, Any]


class Cluster(Protocol):
    """What reconcile needs from a cluster."""

    def read_job(self, namespace: str, name: str) -> Manifest | None: ...
    def list_pods(self, namespace: str, job: str) -> list[Manifest]: ...
    def service_exists(self, namespace: str, job: str) -> bool: ...
    def log_tail(self, namespace: str, pod: str, lines: int) -> str: ...
    def progress(self, pod: Manifest) -> tuple[Progress | None, CheckpointStatus | None]: ...
    def write_status(self, namespace: str, name: str, resource_version: str, status: Manifest) -> None: ...
    def create(self, namespace: str, manifests: list[Manifest]) -> None: ...
    def delete_pods(self, namespace: str, names: list[str]) -> None: ...
    def delete_job(self, namespace: str, name: str) -> None: ...
    def emit(self, job: Manifest, events: list[Event]) -> None: ...


@dataclass(frozen=True)
class Outcome:
    """What a reconcile did, for the caller's scheduling and metrics; `after` is None when the job is gone."""

    before: TrainingJobStatus | None = None
    after: TrainingJobStatus | None = None
    requeue_after: float | None = None


def _observe(cluster: Cluster, job: TrainingJob, log_tail_lines: int) -> Observed:
    namespace, name = str(job.metadata.namespace), str(job.metadata.name)
    pods = cluster.list_pods(namespace, name)
    counted = job.status.last_failure.pod_uid if job.status and job.status.last_failure else None
    failed = [
        p["metadata"]["name"]
        for p in pods
        if (p.get("status") or {}).get("phase") == PodPhase.FAILED and p["metadata"].get("uid") != counted
    ]
    tails = {pod: cluster.log_tail(namespace, pod, log_tail_lines) for pod in failed[:3]} if log_tail_lines else {}
    observed = observe(pods, CONTAINER_NAME, cluster.service_exists(namespace, name), tails)
    rank0_name = Replica(ROLE_WORKER, 0).pod_name(name, job.status.attempt if job.status else 0)
    rank0 = next((p for p in pods if p["metadata"]["name"] == rank0_name), None)
    if rank0 is None:
        return observed
    progress, checkpoint = cluster.progress(rank0)
    return Observed(observed.pods, observed.service_exists, progress, checkpoint)


def _invalid(job_manifest: dict[str, object], error: ValidationError, now: datetime) -> TrainingJobStatus:
    """A job the apiserver accepted but the model refuses (e.g. written before a CRD upgrade) fails, with why."""
    message = f"The job's spec is invalid: {error.errors()[0]['loc']}: {error.errors()[0]['msg']}."
    status = TrainingJobStatus.model_validate(job_manifest.get("status") or {})
    status.phase = Phase.FAILED
    status.conditions = set_condition(
        status.conditions, ConditionType.FAILED, True, "InvalidSpec", message, now=now, generation=None
    )
    status.completion_time = status.completion_time or now
    return status


def reconcile(
    cluster: Cluster, namespace: str, name: str, *, now: datetime, settings: Settings, log_tail_lines: int = 20
) -> Outcome:
    """Bring one job's children and status in line with its spec; safe to run again at any point."""
    manifest = cluster.read_job(namespace, name)
    if manifest is None or manifest["metadata"].get("deletionTimestamp"):
        return Outcome()
    version = manifest["metadata"]["resourceVersion"]
    try:
        job = TrainingJob.model_validate(manifest)
    except ValidationError as error:
        status = _invalid(manifest, error, now)
        cluster.write_status(namespace, name, version, status.model_dump(mode="json", by_alias=True, exclude_none=True))
        return Outcome(after=status)
    before = job.status or TrainingJobStatus()
    result = plan(job, _observe(cluster, job, log_tail_lines), now, settings)
    if result.status != before:
        cluster.write_status(namespace, name, version, _status_patch(before, result.status))
    if result.delete:
        cluster.delete_pods(namespace, result.delete)
    if result.create:
        cluster.create(namespace, result.create)
    if result.events:
        cluster.emit(manifest, result.events)
    if result.delete_job:
        cluster.delete_job(namespace, name)
    return Outcome(before, result.status, result.requeue_after)


def _status_patch(before: TrainingJobStatus, after: TrainingJobStatus) -> dict[str, object]:
    """A merge patch: the new status, with null for fields that are gone."""
    old = before.model_dump(mode="json", by_alias=True, exclude_none=True)
    new: dict[str, object] = after.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {**{key: None for key in old if key not in new}, **new}
