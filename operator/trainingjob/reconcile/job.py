"""One reconcile of one job: observe the cluster once, plan, write the status, announce, then act; what the
actions returned (the UIDs of created pods, refused creations) is written back wave by wave, and each wave's pods
released from the tracking gate once the status names them."""

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, TypeVar

from pydantic import ValidationError

from trainingjob.children.contract import ROLE_WORKER
from trainingjob.children.naming import CONTAINER_NAME, Replica
from trainingjob.children.observe import Observed, observe
from trainingjob.kube.ports import Cluster, Conflict, Created, Gone, Manifest
from trainingjob.model import ConditionType, TrainingJob, TrainingJobStatus
from trainingjob.plan import Event, Plan, Settings, creation, logs, plan, tracking
from trainingjob.plan.invalid import plan_invalid, salvaged_status
from trainingjob.settings import OperatorSettings

log = logging.getLogger(__name__)
T = TypeVar("T")
TAIL_LINES: int = OperatorSettings.model_fields["log_tail_lines"].default
FIRST_WAVE = 16  # pods created before the first are recorded and released; each wave after is twice the last


@dataclass(frozen=True)
class Outcome:
    """What a reconcile did, for the caller's scheduling and metrics; `after` is None when the job is gone, `job`
    when it is gone or its spec is invalid."""

    before: TrainingJobStatus | None = None
    after: TrainingJobStatus | None = None
    requeue_after: float | None = None
    job: TrainingJob | None = None


def merge_patch(old: Any, new: Any) -> Any:
    """The JSON merge patch (RFC 7386) that turns `old` into `new`: null for every field that is gone, at
    any depth, so nothing of an earlier status lingers."""
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return new
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        if key not in old or old[key] != value:
            patch[key] = merge_patch(old.get(key), value) if isinstance(value, Mapping) else value
    return patch


def _observe(
    cluster: Cluster, job: TrainingJob, pods: list[Manifest], service: Manifest | None, lines: int
) -> Observed:
    namespace, name, uid = str(job.metadata.namespace), str(job.metadata.name), str(getattr(job.metadata, "uid", ""))
    observed = observe(pods, CONTAINER_NAME, job_uid=uid, service=service)
    wanted = logs.wanted(job.status, observed) if lines else []
    if wanted:
        tails = {pod: cluster.log_tail(namespace, pod, lines) for pod in wanted}
        observed = observe(pods, CONTAINER_NAME, job_uid=uid, service=service, log_tails=tails)
    attempt = job.status.attempt if job.status else 0
    rank0 = Replica(ROLE_WORKER, 0).pod_name(name, attempt)
    ours = {p.name for p in observed.of_attempt(attempt)}
    manifest = next((p for p in pods if p["metadata"].get("name") == rank0), None)
    if manifest is None or rank0 not in ours:
        return observed
    progress, checkpoint = cluster.progress(manifest)
    if progress is not None and progress.attempt is None:
        progress = progress.model_copy(update={"attempt": attempt})
    return replace(observed, progress=progress, checkpoint=checkpoint)


def reconcile(
    cluster: Cluster, namespace: str, name: str, *, now: datetime, settings: Settings, log_tail_lines: int = TAIL_LINES
) -> Outcome:
    """Bring one job's children and status in line with its spec; safe to run again at any point."""
    manifest = cluster.read_job(namespace, name)
    if manifest is None or manifest["metadata"].get("deletionTimestamp"):
        return Outcome()
    pods, service = cluster.list_pods(namespace, name), cluster.read_service(namespace, name)
    job: TrainingJob | None = None
    try:
        job = TrainingJob.from_manifest(manifest)
    except ValidationError as error:
        observed = observe(pods, CONTAINER_NAME, job_uid=str(manifest["metadata"].get("uid", "")), service=service)
        result = plan_invalid(manifest, error, observed, now)
    else:
        result = plan(job, _observe(cluster, job, pods, service, log_tail_lines), now, settings)
    before = salvaged_status(manifest.get("status"))
    try:
        after = _act(cluster, manifest, result, now)
    except Gone:
        return Outcome(before)
    return Outcome(before, after, result.requeue_after, job)


def _dump(status: TrainingJobStatus) -> Manifest:
    return status.model_dump(mode="json", by_alias=True, exclude_none=True)


def _act(cluster: Cluster, manifest: Manifest, result: Plan, now: datetime) -> TrainingJobStatus:
    """Write the status first (the commit point), announce, delete, release, create, then record what creating
    did."""
    metadata = manifest["metadata"]
    namespace, name, version = metadata["namespace"], metadata["name"], metadata["resourceVersion"]
    stored = manifest.get("status") or {}
    patch = merge_patch(stored, _dump(result.status))
    if patch:
        version = cluster.write_status(namespace, name, version, patch)
    _log(namespace, name, result)
    if result.events:
        cluster.emit(manifest, result.events)
    if result.delete:
        cluster.delete_pods(namespace, result.delete)
    if result.force_delete:
        cluster.delete_pods(namespace, result.force_delete, force=True)
    if result.ungate:
        cluster.ungate(namespace, result.ungate)
    status = result.status
    if result.create:
        status = _create_in_waves(cluster, (manifest, version), status, result.create, now)
    if result.delete_job:
        cluster.delete_job(namespace, name)
    return status


def _create_in_waves(
    cluster: Cluster,
    written: tuple[Manifest, str],
    status: TrainingJobStatus,
    create: Sequence[Manifest],
    now: datetime,
) -> TrainingJobStatus:
    """Create in waves that double in size (the Service, key and policy go first), each recorded and released
    before the next is sent: the scheduler starts on a large gang's first pods while its last are still being
    created. A wave with refusals, or one that could not be recorded, ends it: the next pass goes on."""
    manifest, version = written
    others = [m for m in create if m["kind"] != "Pod"]
    pods = [m for m in create if m["kind"] == "Pod"]
    for index, wave in enumerate(waves(pods, FIRST_WAVE) or [[]]):
        done = cluster.create(manifest["metadata"]["namespace"], [*others, *wave] if index == 0 else wave)
        recorded = _record_creation(cluster, (manifest, version), status, done, now)
        if recorded is None:
            return status  # the next pass sees the pods and the refusals again
        status, version = recorded
        if done.refusals:
            break
    return status


def _record_creation(
    cluster: Cluster, written: tuple[Manifest, str], status: TrainingJobStatus, done: Created, now: datetime
) -> tuple[TrainingJobStatus, str] | None:
    """Track the pods just created, and record refusals, in a write on the version just written; then release
    the pods from the tracking gate (the next pass does, if this write is cut off). The status and version now,
    or None if the job changed meanwhile."""
    manifest, version = written
    metadata = manifest["metadata"]
    after = creation.refused(tracking.created(status, done.pods), done.refusals, now, metadata.get("generation"))
    if after == status:
        return status, version
    try:
        patch = merge_patch(_dump(status), _dump(after))
        version = cluster.write_status(metadata["namespace"], metadata["name"], version, patch)
    except Conflict:
        return None
    if done.pods:
        cluster.ungate(metadata["namespace"], sorted(done.pods))
    if done.refusals and _condition_message(status) != _condition_message(after):
        first = done.refusals[0]
        message = f"Creating pod {first.name} was refused ({first.code}): {first.message}"[:1024]
        cluster.emit(manifest, [Event("Warning", "PodCreateRefused", message)])
        log.warning("%s/%s attempt %d: %s", metadata["namespace"], metadata["name"], status.attempt, message)
    return after, version


def _condition_message(status: TrainingJobStatus) -> str:
    created = next((c for c in status.conditions if c.type == ConditionType.CREATED), None)
    return f"{created.reason}: {created.message}" if created else ""


def _log(namespace: str, name: str, result: Plan) -> None:
    """One line per decision, naming the job and the attempt: what the operator did and why."""
    attempt = result.status.attempt
    for event in result.events:
        level = logging.WARNING if event.type == "Warning" else logging.INFO
        log.log(
            level,
            "%s/%s attempt %d: %s: %s",
            namespace,
            name,
            attempt,
            event.reason,
            event.message,
            extra={"job": f"{namespace}/{name}", "attempt": attempt, "decision": event.reason},
        )
    if result.create or result.delete or result.force_delete:
        log.debug(
            "%s/%s attempt %d: create %d, delete %d, force-delete %d (%s)",
            namespace,
            name,
            attempt,
            len(result.create),
            len(result.delete),
            len(result.force_delete),
            ", ".join(result.decisions),
        )


def waves(items: Sequence[T], first: int) -> list[list[T]]:
    """`items` in order, in waves of first, 2 x first, 4 x first... items; the last wave takes whatever is left
    when that is less than twice the wave before it (1,024 in waves of 16: 16, 32, 64, 128, 256, 528)."""
    result: list[list[T]] = []
    start, size = 0, max(first, 1)
    while start < len(items):
        end = len(items) if len(items) - start < 2 * size else start + size
        result.append(list(items[start:end]))
        start, size = end, 2 * size
    return result
