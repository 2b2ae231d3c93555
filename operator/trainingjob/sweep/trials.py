"""A trial's state from its TrainingJob: phase, the objective so far and its curve. Finished trials are final."""

from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from trainingjob.model import Phase, TrainingJob
from trainingjob.model.history import EvaluationPoint
from trainingjob.model.sweep_status import MAX_CURVE_POINTS, MAX_TRIAL_MESSAGE, ObjectivePoint, Trial, TrialPhase

SWEEP_LABEL = "trainingjob.io/sweep"
TRIAL_LABEL = "trainingjob.io/trial"
PARAMETERS_ANNOTATION = "trainingjob.io/parameters"


@dataclass(frozen=True)
class Child:
    """A trial's TrainingJob as the sweep sees it."""

    name: str
    owner_uid: str  # the uid of the sweep that controls it ("" when none)
    job: TrainingJob | None  # None when its manifest is not a valid TrainingJob (never written by us)
    created: datetime | None
    deleting: bool
    uid: str = ""

    @property
    def is_active(self) -> bool:
        """Still running or able to: not finished, suspended or being deleted."""
        if self.job is None or self.deleting:
            return False
        finished = self.job.status is not None and self.job.status.phase.is_terminal
        return not finished and not self.job.spec.run_policy.suspend


def controller_of(manifest: Mapping[str, Any]) -> str:
    """The uid of the object that controls `manifest` ("" when none)."""
    owners = [o for o in (manifest.get("metadata") or {}).get("ownerReferences") or [] if o.get("controller")]
    return str(owners[0].get("uid", "")) if owners else ""


def child(manifest: Mapping[str, Any], *, parse: bool = True) -> Child:
    """Read a TrainingJob manifest from the store; without `parse`, only its metadata (job None): enough for a
    finished trial's job, which the planner only looks up by name and owner."""
    metadata = manifest.get("metadata") or {}
    job: TrainingJob | None = None
    if parse:
        with suppress(ValidationError):
            job = TrainingJob.from_manifest(
                {k: v for k, v in manifest.items() if k in ("apiVersion", "kind", "metadata", "spec", "status")}
            )
    created = metadata.get("creationTimestamp")
    return Child(
        name=str(metadata.get("name", "")),
        owner_uid=controller_of(manifest),
        job=job,
        created=datetime.fromisoformat(created) if isinstance(created, str) else None,
        deleting=bool(metadata.get("deletionTimestamp")),
        uid=str(metadata.get("uid", "") or ""),
    )


def marks(total_steps: int) -> list[int]:
    """The steps a curve is taken at: each sixteenth of `total_steps` (rounded; the same step once)."""
    return sorted({max(1, round(total_steps * k / MAX_CURVE_POINTS)) for k in range(1, MAX_CURVE_POINTS + 1)})


def curve(evaluations: Sequence[EvaluationPoint], metric: str, total_steps: int | None = None) -> list[ObjectivePoint]:
    """The metric during training, at most MAX_CURVE_POINTS points. With `total_steps`: at each sixteenth of it
    that the evaluations have reached, the value of the evaluation nearest to it (the earlier on a tie), so trials
    evaluated at different steps or seen at different moments share their curve's steps. Without: the evaluations
    at steps that are multiples of the first one's step times the least power of two that fits."""
    points = [ObjectivePoint(step=e.step, value=e.metrics[metric]) for e in evaluations if metric in e.metrics]
    if not points:
        return []
    if total_steps:
        reached = [mark for mark in marks(total_steps) if mark <= points[-1].step]
        return [ObjectivePoint(step=mark, value=_nearest(points, mark).value) for mark in reached]
    if len(points) <= MAX_CURVE_POINTS or points[0].step == 0:
        return points[-MAX_CURVE_POINTS:]
    unit = points[0].step
    while len(kept := [p for p in points if p.step % unit == 0]) > MAX_CURVE_POINTS:
        unit *= 2
    return kept


def _evaluations(job: TrainingJob, now: datetime) -> list[EvaluationPoint]:
    """The job's evaluations: its history's (thinned, so the newest may be missing), and its latest report's."""
    status = job.status
    kept = list(status.history.evaluations) if status and status.history else []
    progress = status.progress if status else None
    if progress is None or not progress.metrics or progress.metrics_step is None:
        return kept
    if kept and kept[-1].step >= progress.metrics_step:
        return kept
    return [*kept, EvaluationPoint(step=progress.metrics_step, time=now, metrics=progress.metrics)]


def _nearest(points: Sequence[ObjectivePoint], step: int) -> ObjectivePoint:
    return min(points, key=lambda point: (abs(point.step - step), point.step))


def _total_steps(job: TrainingJob) -> int | None:
    """The steps the job runs to: as its trainer reported them, else as its spec sets them."""
    progress = job.status.progress if job.status else None
    if progress is not None and progress.total_steps:
        return progress.total_steps
    return job.spec.trainer.steps if job.spec.trainer is not None else None


def observed(trial: Trial, found: Child | None, metric: str, now: datetime) -> Trial:
    """The trial as its job now shows it. A finished trial stays as it is; a trial whose job was never seen is
    left for creation; a job that vanished after it was seen fails its trial."""
    if trial.phase.is_finished:
        return trial
    if found is None or found.job is None:
        if trial.start_time is None:
            return trial
        return ended(trial, TrialPhase.FAILED, "JobDeleted", f"its TrainingJob {trial.job_name} was deleted", now)
    job = found.job
    start = trial.start_time or found.created or now
    status = job.status
    evaluations = _evaluations(job, now)
    total = _total_steps(job)
    latest = next((e for e in reversed(evaluations) if metric in e.metrics), None)
    update = {
        "start_time": start,
        "curve": curve(evaluations, metric, total),
        "objective": latest.metrics[metric] if latest else None,
        "objective_step": latest.step if latest else None,
        "step": status.progress.step if status and status.progress else None,
        "total_steps": total,
    }
    phase = status.phase if status else Phase.PENDING
    if phase == Phase.SUCCEEDED:
        return _succeeded(trial.model_copy(update=update), job, metric, now)
    if phase == Phase.FAILED:
        message = next((c.message for c in status.conditions if c.type.value == "Failed"), "") if status else ""
        return ended(trial.model_copy(update=update), TrialPhase.FAILED, "JobFailed", message, now)
    running = phase in (Phase.RUNNING, Phase.RESTARTING)
    return trial.model_copy(update={**update, "phase": TrialPhase.RUNNING if running else TrialPhase.PENDING})


def _succeeded(trial: Trial, job: TrainingJob, metric: str, now: datetime) -> Trial:
    result = job.status.result if job.status else None
    metrics = (result.metrics if result else None) or {}
    if metric not in metrics:
        reported = ", ".join(sorted(metrics)) or "none"
        message = f"the job succeeded without reporting {metric} (its final metrics: {reported})"
        return ended(trial, TrialPhase.FAILED, "ObjectiveMissing", message, now)
    done = trial.model_copy(
        update={"objective": metrics[metric], "objective_step": result.metrics_step if result else None}
    )
    return ended(done, TrialPhase.SUCCEEDED, None, "", now)


def ended(trial: Trial, phase: TrialPhase, reason: str | None, message: str, now: datetime) -> Trial:
    """The trial finished at `now` in `phase`, saying why (in at most MAX_TRIAL_MESSAGE characters)."""
    update = {"phase": phase, "reason": reason, "message": message[:MAX_TRIAL_MESSAGE], "completion_time": now}
    return trial.model_copy(update=update)
