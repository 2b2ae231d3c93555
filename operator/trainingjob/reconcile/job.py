"""One reconcile of one job: observe its children once, plan (pure), write the status (the commit point),
announce, then act. Pods are created with the tracking finalizer, ready to be scheduled: one write each on the way
up. They go out in waves (a refusal stops the next), and what the waves did is recorded in one status write
(plan.waves.after_wave decides it): a pass writes the status at most twice. A pod's finalizer is removed after the
status that no longer needs it is written (plan/release.py); a job that is gone or being deleted has its pods let
go of as they are deleted. Every delete names the object it was decided on: a pod by the UID it was observed with,
the job by its UID and the version this pass last wrote, so a namesake created meanwhile is never touched."""

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from trainingjob.children.contract import ROLE_WORKER
from trainingjob.children.naming import CONTAINER_NAME, Replica
from trainingjob.children.observe import Observed, PodPhase, observe, pod_state, with_log_tails
from trainingjob.children.pod_memory import PodMemory
from trainingjob.children.progress_report import Report
from trainingjob.kube.ports import Cluster, Conflict, Created, Gone, Manifest, Queues, Room
from trainingjob.model import Mode, TrainingJob, TrainingJobStatus
from trainingjob.plan import Plan, Settings, logs, plan, queue
from trainingjob.plan.evaluations import next_read
from trainingjob.plan.invalid import plan_invalid, salvaged_status
from trainingjob.plan.release import orphans
from trainingjob.plan.waves import FIRST_WAVE, Refusal, after_wave, waves
from trainingjob.reconcile import room as elastic_room
from trainingjob.reconcile.ps_workers import order_workers, worker_gangs
from trainingjob.reconcile.status_pace import StatusPace
from trainingjob.settings import OperatorSettings

log = logging.getLogger(__name__)
TAIL_LINES: int = OperatorSettings.model_fields["log_tail_lines"].default


stopwatch = time.monotonic  # the clock Outcome.deciding_seconds is measured on


@dataclass(frozen=True)
class Outcome:
    """What a reconcile did, for the caller's scheduling and metrics; `after` is None when the job is gone, `job`
    when it is gone or its spec is invalid."""

    before: TrainingJobStatus | None = None
    after: TrainingJobStatus | None = None
    requeue_after: float | None = None
    job: TrainingJob | None = None
    deciding_seconds: float = 0.0  # what the pass took to read its memory, observe and plan (no network, no writes)


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


def rank0_pod(job: TrainingJob, observed: Observed, pods: list[Manifest]) -> Manifest | None:
    """Rank 0's pod of the pods the job runs in, when it is the job's own."""
    status = job.status or TrainingJobStatus()
    rank0 = Replica(ROLE_WORKER, 0).pod_name(str(job.metadata.name), status.current_pods_attempt)
    if rank0 not in {p.name for p in observed.of_attempt(status.current_pods_attempt)}:
        return None
    return next((p for p in pods if p["metadata"].get("name") == rank0), None)


def _observe(
    cluster: Cluster,
    job: TrainingJob,
    observed: Observed,
    pods: list[Manifest],
    lines: int,
    *,
    queues: Queues | None = None,
) -> Observed:
    """Read what the job's pods and Service do not say, once: a queued job's Kueue Workload, the logs of the
    failures to record, rank 0's progress and (when its pod is not ready, or a restart in place is under way) its
    agent's account of the gang; in parameter-server mode, each worker's agent's so (reconcile/ps_workers.py)."""
    namespace, uid = str(job.metadata.namespace), str(getattr(job.metadata, "uid", ""))
    if queues is not None and queue.consulted(job):
        observed = replace(observed, queue=queues.read(namespace, str(job.metadata.name), uid))
    wanted = logs.wanted(job.status, observed) if lines else []
    observed = with_log_tails(observed, {pod: cluster.log_tail(namespace, pod, lines) for pod in wanted})
    observed = replace(observed, worker_gangs=worker_gangs(cluster, job, observed, pods))
    manifest, status = rank0_pod(job, observed, pods), job.status or TrainingJobStatus()
    if manifest is None:
        departed = _departed_rank0(cluster, job)
        return _with_report(observed, departed, status) if departed is not None else observed
    observed = _with_report(observed, cluster.progress(manifest), status)
    rank0 = next(p for p in observed.pods if p.name == manifest["metadata"]["name"])
    ask = rank0.in_place and rank0.phase == PodPhase.RUNNING and (not rank0.ready or status.in_place_restart)
    return replace(observed, gang=cluster.gang(manifest) if ask and job.spec.mode == Mode.DDP else None)


def _with_report(observed: Observed, report: Report, status: TrainingJobStatus) -> Observed:
    progress, checkpoint = report
    if progress is not None and progress.attempt is None:
        progress = progress.model_copy(update={"attempt": status.attempt})
    return replace(observed, progress=progress, checkpoint=checkpoint)


def _departed_rank0(cluster: Cluster, job: TrainingJob) -> Report | None:
    """The last words of rank 0's pod when it is gone already (the kubelet deletes a pod a moment after its final
    status): a suspended rank's final checkpoint. Only those of the pod the status tracks, by UID."""
    status = job.status or TrainingJobStatus()
    name = Replica(ROLE_WORKER, 0).pod_name(str(job.metadata.name), status.current_pods_attempt)
    said = cluster.departed(str(job.metadata.namespace), name)
    tracked = {t.uid for t in status.tracked_pods if t.name == name}  # index 0's record keeps its UID
    return said[1] if said is not None and said[0] in tracked else None


def _parsed(manifest: Manifest) -> TrainingJob:
    """The job. A status the model refuses under a valid spec (written by a newer version of the operator, before
    a rollback) is taken field by field, what is still valid kept, rather than failing the job: the spec is the
    user's, the status the operator's bookkeeping (its pods, with their finalizers, are found again)."""
    try:
        return TrainingJob.from_manifest(manifest)
    except ValidationError:
        if not isinstance(manifest.get("status"), Mapping):
            raise
    job = TrainingJob.from_manifest({**manifest, "status": None})  # raises, naming the spec's error
    return job.model_copy(update={"status": salvaged_status(manifest["status"])})


def reconcile(
    cluster: Cluster,
    namespace: str,
    name: str,
    *,
    now: datetime,
    settings: Settings,
    log_tail_lines: int = TAIL_LINES,
    queues: Queues | None = None,
    room: Room | None = None,
    memory: PodMemory | None = None,
    pace: StatusPace | None = None,
) -> Outcome:
    """Bring one job's children and status in line with its spec; safe to run again at any point. With `queues`,
    a job with scheduling.queueName runs as Kueue admits its Workload (plan/queue.py); with `room`, a shrunk elastic
    job grows back when its workers fit (reconcile/room.py); with `memory`, pods read before and unchanged since
    are not read again (children/pod_memory.py); with `pace`, a change of the counts alone is written at most every
    5 s (reconcile/status_pace.py)."""
    manifest = cluster.read_job(namespace, name)
    if manifest is None or manifest["metadata"].get("deletionTimestamp"):
        if memory is not None:
            memory.forget((namespace, name))
        if pace is not None:
            pace.forget((namespace, name))
        left = orphans(cluster.list_pods(namespace, name), None)
        if left:
            cluster.release_pods(namespace, left)  # the job's (or a namesake's) pods, as they are deleted
        return Outcome()
    # What the pass costs to decide, for the rest after it (runtime/controller.py): its reads from memory, the
    # observation and the plan, on the clock (so a busy machine's waits count), but not its reads over the network.
    started = stopwatch()
    pods, service = cluster.list_pods(namespace, name), cluster.read_service(namespace, name)
    read = memory.reader((namespace, name)) if memory is not None else pod_state
    uid = str(manifest["metadata"].get("uid", ""))
    job: TrainingJob | None = None
    rank0: Manifest | None = None
    try:
        job = _parsed(manifest)
    except ValidationError as error:
        observed = observe(pods, CONTAINER_NAME, job_uid=uid, service=service, read=read)
        result = plan_invalid(manifest, error, observed, now)
        deciding = stopwatch() - started
    else:
        observed = observe(pods, CONTAINER_NAME, job_uid=uid, service=service, read=read)
        deciding = stopwatch() - started
        observed = _observe(cluster, job, observed, pods, log_tail_lines, queues=queues)
        observed = replace(observed, spare=elastic_room.spare(room, job, now, settings.resize_interval_seconds))
        planning = stopwatch()
        result, rank0 = plan(job, observed, now, settings), rank0_pod(job, observed, pods)
        deciding += stopwatch() - planning
    before, written = salvaged_status(manifest.get("status")), manifest.get("status") or {}
    decided = _dump(result.status)
    held = pace.hold((namespace, name), written, decided, result) if pace is not None else None
    try:
        dumped = written if held is not None else decided  # a change of the counts alone, held back: none written
        after = _act(cluster, manifest, result, now, rank0, uids=observed_uids(pods), pods=pods, dumped=dumped)
    except Gone:
        return Outcome(before, deciding_seconds=deciding)
    if pace is not None and held is None and (decided != written or after is not result.status):  # (or recorded)
        pace.wrote((namespace, name))
    if queues is not None and job is not None and result.workload is not None:
        queues.apply(job, result.workload, now)  # after the status that led to it is written
    requeue = _sooner(_sooner(result.requeue_after, held), _trial_read(job, after, now))
    return Outcome(before, after, requeue, job, deciding)


def _trial_read(job: TrainingJob | None, after: TrainingJobStatus | None, now: datetime) -> float | None:
    return next_read(job, after, now) if job is not None and after is not None else None


def _sooner(first: float | None, second: float | None) -> float | None:
    if first is None or second is None:
        return second if first is None else first
    return min(first, second)


def observed_uids(objects: Sequence[Manifest]) -> dict[str, str]:
    """Each observed object's name -> its UID: what a delete decided on these objects is guarded by."""
    return {str(o["metadata"]["name"]): str(o["metadata"].get("uid") or "") for o in objects}


def decided_on(uids: Mapping[str, str], names: Sequence[str]) -> dict[str, str]:
    """The pods `names` as observed (name -> UID); a name not observed (nothing to guard the delete by) is left
    out, as is one observed without a UID."""
    return {name: uids[name] for name in names if uids.get(name)}


def _dump(status: TrainingJobStatus) -> Manifest:
    return status.model_dump(mode="json", by_alias=True, exclude_none=True)


@dataclass(frozen=True)
class _Written:
    """The job as last written by this pass: its manifest as read, the status written and its resourceVersion."""

    manifest: Manifest
    status: TrainingJobStatus
    version: str

    @property
    def namespace(self) -> str:
        return str(self.manifest["metadata"]["namespace"])

    @property
    def name(self) -> str:
        return str(self.manifest["metadata"]["name"])


def _act(
    cluster: Cluster,
    manifest: Manifest,
    result: Plan,
    now: datetime,
    rank0: Manifest | None,
    *,
    uids: Mapping[str, str],
    pods: Sequence[Manifest] = (),
    dumped: Manifest | None = None,
) -> TrainingJobStatus:
    """Write the status first (the commit point: `dumped`, the plan's status as the API takes it; the one read when
    a change of the counts alone is held back), announce, tell rank 0's agent, delete (the pods as observed:
    `uids`), let go of the pods the status no longer needs (and a namesake's being deleted), release an earlier
    operator's gated pods, create, and delete the job last (the one read, as this pass last wrote it)."""
    metadata = manifest["metadata"]
    namespace, name, version = metadata["namespace"], metadata["name"], metadata["resourceVersion"]
    dumped = _dump(result.status) if dumped is None else dumped
    patch = merge_patch(manifest.get("status") or {}, dumped)
    if patch:
        version = cluster.write_status(namespace, name, version, patch)
    _log(namespace, name, result)
    if result.events:  # about the job as written: its restarts now tell a new failure from a cause said again
        cluster.emit({**manifest, "status": dumped}, result.events)
    if result.order_attempt is not None and rank0 is not None:
        told = cluster.order(rank0, str(metadata.get("uid", "")), result.order_attempt, result.pacing)
        log.info("%s/%s: told rank 0's agent to run attempt %d: %s", namespace, name, result.order_attempt, told)
    if (after := result.ask_checkpoint) is not None and rank0 is not None:
        asked = cluster.ask_checkpoint(rank0, str(metadata.get("uid", "")), result.status.attempt, after)
        log.info("%s/%s: asked rank 0 for a checkpoint after step %d: %s", namespace, name, after, asked)
    order_workers(cluster, manifest, result.order_workers, pods)
    if result.delete:
        cluster.delete_pods(namespace, decided_on(uids, result.delete))
    if result.force_delete:
        cluster.delete_pods(namespace, decided_on(uids, result.force_delete), force=True)
    let_go = decided_on(uids, result.release) | orphans(pods, str(metadata.get("uid", "")))
    if let_go:
        cluster.release_pods(namespace, let_go)
    if result.ungate:
        cluster.ungate(namespace, decided_on(uids, result.ungate))
    written = _Written(manifest, result.status, version)
    if result.create:
        written = _create_in_waves(cluster, written, result.create, now, result.all_created)
    if result.delete_job:
        cluster.delete_job(namespace, name, str(metadata.get("uid", "")), written.version)
    return written.status


def _create_in_waves(
    cluster: Cluster, written: _Written, create: Sequence[Manifest], now: datetime, all_created: str | None
) -> _Written:
    """Create the objects the pods need (the Service, key and policy) first, and the pods only once all of them
    exist (created now or found), in waves that double in size (a refusal ends them: the rest would be refused
    too), then record what they did in one status write. The pods need no record before they may run: their
    finalizer keeps each until the status says how it ended, and a pass cut off before the record leaves pods the
    next one finds by their labels and owner. A record that could not be written (the job changed) is the next
    pass's to make."""
    others = [m for m in create if m["kind"] != "Pod"]
    pods = [m for m in create if m["kind"] == "Pod"]
    if others:
        done = cluster.create(written.namespace, others)
        if done.refusals or not pods:
            return _record(cluster, written, done, now, prepared_sent=True) or written
    created: dict[str, str] = {}
    refusals: list[Refusal] = []
    for wave in waves(pods, FIRST_WAVE):
        done = cluster.create(written.namespace, wave)
        created |= done.pods
        refusals += done.refusals
        if done.refusals:
            break
    done = Created(created, refusals)
    return _record(cluster, written, done, now, prepared_sent=bool(others), all_created=all_created) or written


def _record(
    cluster: Cluster,
    written: _Written,
    done: Created,
    now: datetime,
    *,
    prepared_sent: bool = False,
    all_created: str | None = None,
) -> _Written | None:
    """Write what the creations did (plan.waves.after_wave decides it) on the version just written. None if the
    job changed meanwhile."""
    generation = written.manifest["metadata"].get("generation")
    decided = after_wave(
        written.status, done.pods, done.refusals, now, generation, prepared_sent=prepared_sent, all_created=all_created
    )
    if decided.status == written.status:
        return written
    try:
        patch = merge_patch(_dump(written.status), _dump(decided.status))
        version = cluster.write_status(written.namespace, written.name, written.version, patch)
    except Conflict:
        return None
    if decided.event is not None:
        cluster.emit({**written.manifest, "status": _dump(decided.status)}, [decided.event])
        log.warning(
            "%s/%s attempt %d: %s", written.namespace, written.name, decided.status.attempt, decided.event.message
        )
    return _Written(written.manifest, decided.status, version)


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
