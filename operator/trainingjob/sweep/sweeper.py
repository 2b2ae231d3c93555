"""The sweeper: the job that removes the last trials' checkpoint folders (sweep/checkpoints.py), which no trial
follows to remove them. Once every trial has finished and folders remain to remove (the same rule as
checkpoints.to_remove: not the keepBestCheckpoints best, each once its trial's grace has passed), the sweep records
a sweeper in its status (status.sweeper), then makes its TrainingJob, named after the sweep and the sweeper's
number (the same name on every pass: an operator killed after any write makes it once). It is the template's job
cut down to one small worker with the checkpoint volume, running `python -m trainer --remove-checkpoints <sweep>`:
its trainer removes the folders its job's annotation names, reports them gone and exits, training nothing (neither
the user's recipe nor the user's command runs). The sweep ends once the sweeper has finished; when more than
SWEEPER_FOLDERS remain, another follows it. A sweeper that fails, whose name is taken, or that has not finished
SWEEPER_DEADLINE_SECONDS after it was decided, ends the sweep anyway, saying which folders stay. A sweeper is
never a trial: not in trials, counts or maxTrials. Its job is deleted once its end is recorded."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from trainingjob.children.contract import SWEEPER_FLAG
from trainingjob.model import API_VERSION, KIND
from trainingjob.model.job import MAX_NAME_LENGTH
from trainingjob.model.sweep import TrainingSweep, TrainingSweepSpec
from trainingjob.model.sweep_status import MAX_TRIAL_MESSAGE, Sweeper, SweeperPhase, Trial
from trainingjob.sweep import checkpoints
from trainingjob.sweep.trial_jobs import owner_reference
from trainingjob.sweep.trials import SWEEP_LABEL, Child

SWEEPER_DEADLINE_SECONDS = 600.0
SWEEPER_FOLDERS = 40  # its final report (a termination message, at most 4096 bytes) names every folder gone
SWEEPER_RESOURCES = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}}
# What a sweeper's worker keeps of the template's: where and as whom it may run, not what it runs.
_KEPT_ROLE_FIELDS = (
    "imagePullPolicy",
    "imagePullSecrets",
    "serviceAccountName",
    "securityContext",
    "nodeSelector",
    "tolerations",
    "affinity",
    "priorityClassName",
    "runtimeClassName",
    "podMetadata",
)
Manifest = dict[str, Any]


@dataclass(frozen=True)
class Sweeping:
    """The sweeper's state to write; whether its job is to be made now; whether the sweep may end, and what its
    end then says of the folders ("" when there is nothing to say); the finished sweeper's job to delete."""

    state: Sweeper | None
    create: bool = False
    done: bool = False
    note: str = ""
    delete: tuple[str, ...] = ()


def sweeper_name(sweep: str, number: int) -> str:
    """<sweep>-sweeper for the first, <sweep>-sweeper<number> after (never "-<digits>" at the end: that is a trial's
    name, trial <number> of a sweep named <sweep>-sweeper); the sweep's name cut to fit a job's name."""
    suffix = "-sweeper" if number == 1 else f"-sweeper{number}"
    return f"{sweep[: MAX_NAME_LENGTH - len(suffix)].rstrip('-')}{suffix}"


def left(spec: TrainingSweepSpec, trials: Sequence[Trial]) -> list[Trial]:
    """The finished trials whose folders are still to remove, in their grace or not."""
    if not checkpoints.shared_volume(spec):
        return []
    kept = checkpoints.kept_best(trials, spec.objective.goal, spec.keep_best_checkpoints)
    return [
        t for t in trials if t.phase.is_finished and t.job_uid and not t.checkpoint_removed and t.number not in kept
    ]


def sweeping(
    sweep: TrainingSweep,
    trials: Sequence[Trial],
    children: Mapping[str, Child],
    own: Mapping[str, Child],
    now: datetime,
) -> Sweeping:
    """What the sweeper does once every trial has finished."""
    spec, name = sweep.spec, str(sweep.metadata.name)
    state = sweep.status.sweeper if sweep.status else None
    if state is not None and state.phase == SweeperPhase.RUNNING:
        state = observed(state, children, own, now)
        if state.phase == SweeperPhase.RUNNING:
            return Sweeping(state, create=state.start_time is None)
    remaining, delete = left(spec, trials), finished_job(state, own)
    if state is not None and (state.phase == SweeperPhase.FAILED or _stalled(state, remaining)):
        return Sweeping(state, done=True, note=_stay(remaining, state), delete=delete)
    if not remaining:
        return Sweeping(state, done=True, delete=delete)
    due = checkpoints.to_remove(spec, trials, now)[:SWEEPER_FOLDERS]
    if not due:
        return Sweeping(state, delete=delete)  # in their grace: a later reconcile names them
    number = state.number + 1 if state is not None else 1
    new = Sweeper(number=number, job_name=sweeper_name(name, number), folders=list(due), since=now)
    return Sweeping(new, create=True, delete=delete)


def _stalled(state: Sweeper, remaining: Sequence[Trial]) -> bool:
    """A sweeper that succeeded but left some of its folders (its trainer refused them): no other follows it."""
    return bool({checkpoints.folder(t) for t in remaining} & set(state.folders))


def _stay(remaining: Sequence[Trial], state: Sweeper) -> str:
    trials = ", ".join(str(t.number) for t in remaining[:20]) + (", ..." if len(remaining) > 20 else "")
    why = state.message or f"its sweeper {state.job_name} left them"
    return f"; the checkpoint folders of trials {trials} stay ({why})"[:MAX_TRIAL_MESSAGE]


def observed(state: Sweeper, children: Mapping[str, Child], own: Mapping[str, Child], now: datetime) -> Sweeper:
    """The running sweeper as its job shows it: finished, failed, or still running (until its deadline)."""
    found, job = own.get(state.job_name), state.job_name
    phase = found.job.status.phase.value if found and found.job and found.job.status else None
    if phase == "Succeeded":
        return state.model_copy(update={"phase": SweeperPhase.SUCCEEDED})
    failure = _failure(state, found, job in children, phase, now)
    if failure:
        return state.model_copy(update={"phase": SweeperPhase.FAILED, "message": failure[:MAX_TRIAL_MESSAGE]})
    if found is not None and state.start_time is None:
        return state.model_copy(update={"start_time": found.created or now})
    return state


def _failure(state: Sweeper, found: Child | None, listed: bool, phase: str | None, now: datetime) -> str:
    """Why the sweeper failed ("" while it has not)."""
    job = state.job_name
    if found is None and listed:
        return f"TrainingJob {job} exists and is not this sweep's"
    if found is None and state.start_time is not None:
        return f"its TrainingJob {job} was deleted"
    if phase == "Failed":
        return f"its TrainingJob {job} failed"
    if (now - state.since).total_seconds() >= SWEEPER_DEADLINE_SECONDS:
        return f"its TrainingJob {job} did not finish in {SWEEPER_DEADLINE_SECONDS:.0f} s"
    return ""


def refused(state: Sweeper, refusal: str) -> Sweeper:
    """The sweeper once the apiserver refused its job (in its words): failed, the sweep ends on the next pass."""
    message = f"the apiserver refused its TrainingJob {state.job_name}: {refusal}"[:MAX_TRIAL_MESSAGE]
    return state.model_copy(update={"phase": SweeperPhase.FAILED, "message": message})


def sweeper_manifest(sweep: TrainingSweep, state: Sweeper) -> Manifest:
    """The sweeper's TrainingJob: one small worker with the template's checkpoint volume, told to remove
    state.folders, controlled by the sweep. The template's image when it runs the built-in trainer; the operator's
    when it runs a command of its own (whose image may have no trainer)."""
    template = sweep.spec.template.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    workers = template["workers"]
    role = {key: workers[key] for key in _KEPT_ROLE_FIELDS if key in workers}
    if "image" in workers and "command" not in workers:
        role["image"] = workers["image"]
    name = str(sweep.metadata.name)
    role.update(replicas=1, command=["python", "-m", "trainer", SWEEPER_FLAG, name], resources=SWEEPER_RESOURCES)
    spec: Manifest = {"mode": "DDP", "workers": role, "checkpoint": template["checkpoint"]}
    scheduling = {k: v for k, v in (template.get("scheduling") or {}).items() if k != "minAvailable"}
    if scheduling:
        spec["scheduling"] = scheduling
    metadata = {
        "name": state.job_name,
        "namespace": sweep.metadata.namespace,
        "labels": {SWEEP_LABEL: name},
        "annotations": checkpoints.annotation(state.folders),
        "ownerReferences": [owner_reference(sweep)],
    }
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": spec}


def finished_job(state: Sweeper | None, own: Mapping[str, Child]) -> tuple[str, ...]:
    """The recorded sweeper's job, to delete once its end is in the status."""
    if state is None or state.phase == SweeperPhase.RUNNING or state.job_name not in own:
        return ()
    return (state.job_name,)
