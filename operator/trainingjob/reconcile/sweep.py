"""One reconcile of one sweep: read the sweep and the TrainingJobs it controls once, plan, then write in the order
that makes a crash harmless: the status, then stop pruned trials' jobs, then create new trials' jobs."""

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from trainingjob.kube.ports import Manifest, SweepCluster, TrialJobsInPart
from trainingjob.model.status import ConditionStatus
from trainingjob.model.sweep import PrunedTrialAction, TrainingSweep
from trainingjob.model.sweep_status import (
    SweepCondition,
    SweepConditionType,
    SweepPhase,
    TrainingSweepStatus,
    TrialPhase,
)
from trainingjob.reconcile.job import merge_patch, observed_uids
from trainingjob.sweep.plan import SweepPlan, after_creates, oversized, plan
from trainingjob.sweep.summary import STATUS_LIMIT_BYTES, status_bytes
from trainingjob.sweep.sweeper import sweeper_manifest
from trainingjob.sweep.trial_jobs import trial_manifest
from trainingjob.sweep.trials import Child, child

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SweepOutcome:
    """What a reconcile did: the status before and after (None when the sweep is gone), and the objective's metric."""

    before: TrainingSweepStatus | None = None
    after: TrainingSweepStatus | None = None
    metric: str = ""


def reconcile_sweep(cluster: SweepCluster, namespace: str, name: str, *, now: datetime) -> SweepOutcome:
    """Bring one sweep's trials and status in line with its spec; safe to run again at any point."""
    manifest = cluster.read_sweep(namespace, name)
    if manifest is None or manifest["metadata"].get("deletionTimestamp"):
        return SweepOutcome()
    try:
        sweep = TrainingSweep.from_manifest(manifest)
    except ValidationError as error:
        return _refuse(cluster, manifest, error, now)
    inside = {t.job_name for t in sweep.status.trials if t.phase not in _SETTLED} if sweep.status else set()
    if sweep.status and sweep.status.sweeper:
        inside.add(sweep.status.sweeper.job_name)
    if isinstance(cluster, TrialJobsInPart):
        listed = cluster.list_trial_jobs_in_part(namespace, name, inside)
    else:
        listed = cluster.list_trial_jobs(namespace, name)
    result = plan(sweep, _children(inside, listed), now)
    size = status_bytes(result.status)
    if size > STATUS_LIMIT_BYTES:
        log.warning("%s/%s: the status would take %d bytes: not written, nothing done", namespace, name, size)
        result = oversized(sweep, size, STATUS_LIMIT_BYTES, now)
    version = str(manifest["metadata"]["resourceVersion"])
    version = _write_status(cluster, manifest, version, sweep.status, result.status)
    refusals = _act(cluster, namespace, sweep, result, observed_uids(listed))
    if not refusals:
        return SweepOutcome(sweep.status, result.status, sweep.spec.objective.metric)
    after = after_creates(result.status, refusals, now)  # written on the version just written
    written = {**manifest, "status": result.status.model_dump(mode="json", by_alias=True, exclude_none=True)}
    _write_status(cluster, written, version, result.status, after)
    return SweepOutcome(sweep.status, after, sweep.spec.objective.metric)


def _children(inside: Collection[str], listed: Sequence[Manifest]) -> dict[str, Child]:
    """The trials' jobs by name, each read in full only where the planner looks inside it (`inside`: an unfinished
    or pruned trial's). The jobs of the other finished trials (thousands, in a large sweep) are known by name and
    owner."""
    found = (child(m, parse=(m.get("metadata") or {}).get("name") in inside) for m in listed)
    return {c.name: c for c in found}


_SETTLED = (TrialPhase.SUCCEEDED, TrialPhase.FAILED)


def _write_status(
    cluster: SweepCluster,
    manifest: Manifest,
    version: str,
    before: TrainingSweepStatus | None,
    after: TrainingSweepStatus,
) -> str:
    """Write `after` over the status `manifest` holds, on `version`; the version the sweep has then."""
    if before == after:
        return version
    old = manifest.get("status") or {}
    new = after.model_dump(mode="json", by_alias=True, exclude_none=True)
    metadata = manifest["metadata"]
    return cluster.write_sweep_status(metadata["namespace"], metadata["name"], version, merge_patch(old, new))


def _act(
    cluster: SweepCluster, namespace: str, sweep: TrainingSweep, result: SweepPlan, uids: Mapping[str, str]
) -> dict[str, str]:
    """Stop the pruned trials' jobs (a delete goes only to the job listed, by its UID), then create new ones, then
    the sweeper's, and delete a finished sweeper's job; the creations the apiserver refused, by job name, in its
    words."""
    for job in result.stop:
        if result.action == PrunedTrialAction.DELETE:
            if uids.get(job):
                cluster.delete_job(namespace, job, uids[job])
        else:
            cluster.suspend_job(namespace, job)
    refusals: dict[str, str] = {}
    for trial in result.create:
        refusal = cluster.create_job(namespace, trial_manifest(sweep, trial, result.removals))
        if refusal is not None:
            name = sweep.metadata.name
            log.warning("%s/%s: the TrainingJob of trial %d was refused: %s", namespace, name, trial.number, refusal)
            refusals[trial.job_name] = refusal
    state = result.status.sweeper
    if result.sweep and state is not None:
        refusal = cluster.create_job(namespace, sweeper_manifest(sweep, state))
        if refusal is not None:
            log.warning("%s/%s: the sweeper's TrainingJob was refused: %s", namespace, sweep.metadata.name, refusal)
            refusals[state.job_name] = refusal
    for job in result.delete:
        if uids.get(job):
            cluster.delete_job(namespace, job, uids[job])
    return refusals


def _refuse(cluster: SweepCluster, manifest: Manifest, error: ValidationError, now: datetime) -> SweepOutcome:
    """A sweep the model refuses (what the CRD's rules cannot see, e.g. a parameter's value the job would refuse)
    fails once, saying which fields are wrong; it starts no trial."""
    message = "; ".join(_problem(e) for e in error.errors())[:4000]
    current = manifest.get("status") or {}
    if current.get("phase") == SweepPhase.FAILED.value:
        return SweepOutcome(None, TrainingSweepStatus(phase=SweepPhase.FAILED))  # said once; still there, failed
    condition = SweepCondition(
        type=SweepConditionType.FAILED,
        status=ConditionStatus.TRUE,
        reason="InvalidSpec",
        message=message,
        last_transition_time=now,
    )
    status = TrainingSweepStatus(phase=SweepPhase.FAILED, conditions=[condition], completion_time=now)
    new = status.model_dump(mode="json", by_alias=True, exclude_none=True)
    metadata = manifest["metadata"]
    log.warning("%s/%s: invalid TrainingSweep: %s", metadata["namespace"], metadata["name"], message)
    cluster.write_sweep_status(
        metadata["namespace"], metadata["name"], str(metadata["resourceVersion"]), merge_patch(current, new)
    )
    return SweepOutcome(None, status)


def _problem(error: Any) -> str:
    location: Sequence[Any] = error.get("loc", ())
    return f"{'.'.join(str(part) for part in location)}: {error.get('msg', '')}"
