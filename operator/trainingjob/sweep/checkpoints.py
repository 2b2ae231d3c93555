"""The checkpoint folders of a sweep's finished trials: which to remove, and which are gone.

A trial's job writes its checkpoints to <checkpoint.path>/<job name>/<job uid>. The operator has no access to
volumes, so a trial removes the folders of the trials before it: each trial's job is created with the annotation
REMOVE_ANNOTATION naming, as "<job name>/<job uid>", the folders of the sweep's finished trials (succeeded, failed,
pruned, deleted) that are not among the keepBestCheckpoints best and are not yet gone; its rank 0 removes them as it
starts (only inside the checkpoint root, only the sweep's) and reports the named folders that are gone
(status.progress.checkpointsCleared); the sweep then marks those trials checkpointRemoved.

Only a persistentVolumeClaim is a volume every trial's pods share (an emptyDir goes with its pod, a hostPath folder
stays on its node), so only then are folders named. A trial's folder is named once its pods have had their
termination grace to end (a stopped trainer writes a final checkpoint as it goes). No trial follows the last
trials: the sweeper (sweeper.py) removes theirs. Those of trials summarised (no longer listed) before one was
named stay."""

import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime

from trainingjob.model.status import CHECKPOINT_FOLDER, MAX_CLEARED
from trainingjob.model.sweep import Goal, TrainingSweepSpec
from trainingjob.model.sweep_status import SummarisedTrials, Trial, TrialPhase
from trainingjob.sweep.trials import Child

REMOVE_ANNOTATION = "trainingjob.io/remove-checkpoints"
MAX_REMOVALS = MAX_CLEARED  # folders one trial is told to remove, the oldest trials' first; the rest: the next trial


def annotation(folders: Sequence[str]) -> dict[str, str]:
    """The annotation that tells a trial's job to remove `folders` (none when there are none)."""
    return {REMOVE_ANNOTATION: json.dumps(list(folders))} if folders else {}


def told(annotations: Mapping[str, str] | None) -> list[str]:
    """The well-formed folders a job's annotation names (anyone may write it: the trainer checks them again)."""
    try:
        named = json.loads((annotations or {}).get(REMOVE_ANNOTATION) or "[]")
    except ValueError:
        return []
    found = named if isinstance(named, list) else []
    return [f for f in found if isinstance(f, str) and re.fullmatch(CHECKPOINT_FOLDER, f)][:MAX_REMOVALS]


def folder(trial: Trial) -> str:
    """The trial's checkpoint folder under the checkpoint root ("" before its job's UID is known)."""
    return f"{trial.job_name}/{trial.job_uid}" if trial.job_uid else ""


def kept_best(trials: Sequence[Trial], goal: Goal, count: int) -> set[int]:
    """The numbers of the `count` best succeeded trials (by objective, the earlier on a tie)."""
    sign = -1.0 if goal == Goal.MAXIMIZE else 1.0
    done = [t for t in trials if t.phase == TrialPhase.SUCCEEDED and t.objective is not None]
    ranked = sorted(done, key=lambda t: (sign * float(t.objective or 0.0), t.number))
    return {t.number for t in ranked[:count]}


def _grace_seconds(spec: TrainingSweepSpec) -> int:
    job = spec.template.spec
    servers = job.parameter_servers
    return max(job.workers.termination_grace_period_seconds, servers.termination_grace_period_seconds if servers else 0)


def shared_volume(spec: TrainingSweepSpec) -> bool:
    """Whether every trial's pods mount the same checkpoint volume: a persistentVolumeClaim."""
    checkpoint = spec.template.spec.checkpoint
    return checkpoint is not None and checkpoint.volume.persistent_volume_claim is not None


def to_remove(spec: TrainingSweepSpec, trials: Sequence[Trial], now: datetime) -> tuple[str, ...]:
    """The folders the trials created now are told to remove: those of finished trials whose pods have had their
    grace to end, not among the keepBestCheckpoints best, not yet gone; at most MAX_REMOVALS, oldest first."""
    if not shared_volume(spec):
        return ()
    kept = kept_best(trials, spec.objective.goal, spec.keep_best_checkpoints)
    grace = _grace_seconds(spec)
    due = [
        t
        for t in trials
        if t.phase.is_finished
        and t.job_uid
        and not t.checkpoint_removed
        and t.number not in kept
        and t.completion_time is not None
        and (now - t.completion_time).total_seconds() >= grace
    ]
    return tuple(folder(t) for t in sorted(due, key=lambda t: t.number)[:MAX_REMOVALS])


def marked(trials: Sequence[Trial], own: Mapping[str, Child]) -> list[Trial]:
    """The trials with their jobs' UIDs (where known) and the folders the trials' trainers reported gone."""
    gone = {name for c in own.values() if c.job is not None for name in _cleared(c)}
    return [_marked(t, own.get(t.job_name), gone) for t in trials]


def _cleared(found: Child) -> list[str]:
    status = found.job.status if found.job is not None else None
    progress = status.progress if status is not None else None
    return list(progress.checkpoints_cleared or []) if progress is not None else []


def _marked(trial: Trial, found: Child | None, gone: set[str]) -> Trial:
    update: dict[str, object] = {}
    if trial.job_uid is None and found is not None and found.uid:
        update["job_uid"] = found.uid
    uid = update.get("job_uid", trial.job_uid)
    if not trial.checkpoint_removed and uid and f"{trial.job_name}/{uid}" in gone:
        update["checkpoint_removed"] = True
    return trial.model_copy(update=update) if update else trial


def removed(listed: Sequence[Trial], summary: SummarisedTrials | None) -> int:
    """How many trials' checkpoint folders are gone, those listed and those summarised."""
    return sum(bool(t.checkpoint_removed) for t in listed) + (summary.checkpoints_removed if summary else 0)
