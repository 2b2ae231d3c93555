"""The sweep planner: plan(sweep, children, now) -> the status to write, then the trials' jobs to stop and to
create. No I/O, no clock. The status is written first, so a trial exists in the status (with its parameters)
before its job does, and a stopped trial is marked Pruned before its job is stopped: an operator killed between
any two writes finishes the work on the next reconcile and never runs a trial twice or loses one."""

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from trainingjob.model.status import ConditionStatus
from trainingjob.model.sweep import Algorithm, EarlyStopping, Goal, PrunedTrialAction, TrainingSweep, TrainingSweepSpec
from trainingjob.model.sweep_status import (
    BestTrial,
    SummarisedTrials,
    SweepCondition,
    SweepConditionType,
    Sweeper,
    SweeperPhase,
    SweepPhase,
    TrainingSweepStatus,
    Trial,
    TrialCounts,
    TrialPhase,
)
from trainingjob.sweep import checkpoints, creation, sweeper
from trainingjob.sweep.learned import Learned, unpacked
from trainingjob.sweep.pruning import Pruned, to_prune
from trainingjob.sweep.sampling import next_parameters, trial_budget
from trainingjob.sweep.summary import compacted
from trainingjob.sweep.trials import Child, ended, observed


@dataclass(frozen=True)
class SweepPlan:
    """What one reconcile does: write `status`, then stop the jobs of `stop`, then create the jobs of `create`
    (told to remove the checkpoint folders `removals`) and the sweeper's job (status.sweeper) when `sweep`, and
    delete the finished sweeper's job `delete`."""

    status: TrainingSweepStatus
    create: tuple[Trial, ...] = ()
    stop: tuple[str, ...] = ()
    action: PrunedTrialAction = PrunedTrialAction.DELETE
    removals: tuple[str, ...] = ()
    sweep: bool = False
    delete: tuple[str, ...] = ()


def job_name(sweep: str, number: int) -> str:
    return f"{sweep}-{number}"


def plan(sweep: TrainingSweep, children: Mapping[str, Child], now: datetime) -> SweepPlan:
    """Decide from the sweep and the TrainingJobs it controls (by name; others are not its own)."""
    spec, uid = sweep.spec, str(getattr(sweep.metadata, "uid", "") or "")
    status = sweep.status or TrainingSweepStatus()
    own = {n: c for n, c in children.items() if c.owner_uid == uid}
    action = (spec.early_stopping or EarlyStopping()).action  # trials stopped as the sweep failed end so too
    trials = [observed(t, own.get(t.job_name), spec.objective.metric, now) for t in status.trials]
    trials = checkpoints.marked(creation.judged(trials, children, own, now), own)
    if status.phase.is_terminal:
        delete = sweeper.finished_job(status.sweeper, own)
        return SweepPlan(status, stop=_still_active(trials, own), action=action, delete=delete)
    earlier = status.summarised.succeeded if status.summarised else 0
    learned = _learned(spec, status.summarised)
    verdicts = {p.number: p for p in to_prune(spec, trials, earlier, learned)}
    trials = [_pruned(t, verdicts[t.number], now) if t.number in verdicts else t for t in trials]
    summary = status.summarised
    failed = sum(t.phase == TrialPhase.FAILED for t in trials) + (summary.failed if summary else 0)
    if failed > spec.max_failed_trials:
        trials = [_stopped(t, now) for t in trials]
        failure = f"{failed} trials failed (maxFailedTrials is {spec.max_failed_trials})"
        stop = _still_active(trials, own)
        ended = _status(sweep, trials, now, (SweepPhase.FAILED, "TooManyFailedTrials", failure), stop)
        return SweepPlan(ended, stop=stop, action=action)
    stop = _still_active(trials, own)  # they count against parallelism until they are stopped
    trials += _new_trials(sweep, trials, summary, stopping=len(stop), learned=learned)
    create = tuple(
        t for t in trials if t.phase == TrialPhase.PENDING and t.start_time is None and t.job_name not in children
    )
    ending = _ending(sweep, trials, summary)
    removals = checkpoints.to_remove(spec, trials, now) if create else ()
    sweeping = sweeper.sweeping(sweep, trials, children, own, now) if ending else sweeper.Sweeping(status.sweeper)
    if ending is not None:
        ending = (ending[0], ending[1], ending[2] + sweeping.note) if sweeping.done else None
    status = _status(sweep, trials, now, ending, stop, sweeping=sweeping)
    return SweepPlan(
        status,
        create=create,
        stop=stop,
        action=action,
        removals=removals,
        sweep=sweeping.create,
        delete=sweeping.delete,
    )


def after_creates(status: TrainingSweepStatus, refusals: Mapping[str, str], now: datetime) -> TrainingSweepStatus:
    """The status once the apiserver refused some trials' jobs (job name -> its words): what the next pass acts on."""
    trials = creation.refused(status.trials, refusals, now)
    state = status.sweeper
    if state is not None and state.job_name in refusals:
        state = sweeper.refused(state, refusals[state.job_name])
    return status.model_copy(update={"trials": trials, "counts": counts(trials, status.summarised), "sweeper": state})


def _started(trials: Sequence[Trial], summary: SummarisedTrials | None) -> int:
    return len(trials) + (summary.total if summary else 0)


def oversized(sweep: TrainingSweep, size: int, limit: int, now: datetime) -> SweepPlan:
    """What a reconcile does when the status it planned would take `size` bytes, over `limit`: nothing but say so
    in the Running condition (StatusTooLarge). A trial's job is made only once the trial is in the status, and a
    trial is stopped only once it is marked Pruned there, so neither happens; the next reconcile plans again."""
    old = sweep.status or TrainingSweepStatus()
    message = (
        f"the status would take {size} bytes, over the {limit} it may: no trial is started or stopped until it"
        " fits (fewer trials at once, shorter parameter values)"
    )
    conditions = _conditions(old.conditions, SweepPhase.RUNNING, "StatusTooLarge", message, now)
    return SweepPlan(old.model_copy(update={"conditions": conditions}))


def _learned(spec: TrainingSweepSpec, summary: SummarisedTrials | None) -> list[Learned]:
    """The summarised trials as the learners (TPE, early stopping) see them; none for the others."""
    if summary is None or (spec.search.algorithm != Algorithm.TPE and spec.early_stopping is None):
        return []
    return unpacked(spec, summary.learned)


def _new_trials(
    sweep: TrainingSweep,
    trials: Sequence[Trial],
    summary: SummarisedTrials | None,
    stopping: int,
    learned: Sequence[Learned],
) -> list[Trial]:
    spec = sweep.spec
    active = sum(not t.phase.is_finished for t in trials) + stopping
    first = _started(trials, summary)
    count = min(spec.parallelism - active, trial_budget(spec) - first)
    if spec.suspend or count <= 0:
        return []
    drawn = next_parameters(spec, trials, count, summarised=first - len(trials), learned=learned)
    return [
        Trial(number=first + i, job_name=job_name(str(sweep.metadata.name), first + i), parameters=values)
        for i, values in enumerate(drawn)
    ]


def _pruned(trial: Trial, verdict: Pruned, now: datetime) -> Trial:
    return ended(trial, TrialPhase.PRUNED, verdict.reason, verdict.message, now)


def _stopped(trial: Trial, now: datetime) -> Trial:
    if trial.phase.is_finished:
        return trial
    return ended(trial, TrialPhase.PRUNED, "SweepFailed", "stopped: the sweep failed", now)


def _still_active(trials: Sequence[Trial], own: Mapping[str, Child]) -> tuple[str, ...]:
    """The jobs of finished trials that still run: pruned ones whose stop was not yet done."""
    return tuple(
        t.job_name for t in trials if t.phase == TrialPhase.PRUNED and t.job_name in own and own[t.job_name].is_active
    )


Ending = tuple[SweepPhase, str, str] | None


def _ending(sweep: TrainingSweep, trials: Sequence[Trial], summary: SummarisedTrials | None) -> Ending:
    started = _started(trials, summary)
    if started < trial_budget(sweep.spec) or not all(t.phase.is_finished for t in trials):
        return None
    if any(t.phase == TrialPhase.SUCCEEDED for t in trials) or (summary and summary.succeeded):
        return SweepPhase.SUCCEEDED, "AllTrialsFinished", f"all {started} trials finished"
    return SweepPhase.FAILED, "NoTrialSucceeded", f"none of the {started} trials succeeded"


def best(trials: Sequence[Trial], goal: Goal) -> BestTrial | None:
    done = [t for t in trials if t.phase == TrialPhase.SUCCEEDED and t.objective is not None]
    if not done:
        return None
    sign = -1.0 if goal == Goal.MAXIMIZE else 1.0
    top = min(done, key=lambda t: (sign * float(t.objective or 0.0), t.number))
    return BestTrial(
        number=top.number, job_name=top.job_name, parameters=top.parameters, objective=float(top.objective or 0.0)
    )


def counts(trials: Sequence[Trial], summary: SummarisedTrials | None = None) -> TrialCounts:
    """The trials by phase, those listed and those summarised."""
    by_phase = {phase: sum(t.phase == phase for t in trials) for phase in TrialPhase}
    earlier = summary or SummarisedTrials()
    return TrialCounts(
        pending=by_phase[TrialPhase.PENDING],
        running=by_phase[TrialPhase.RUNNING],
        succeeded=by_phase[TrialPhase.SUCCEEDED] + earlier.succeeded,
        failed=by_phase[TrialPhase.FAILED] + earlier.failed,
        pruned=by_phase[TrialPhase.PRUNED] + earlier.pruned,
    )


def _status(
    sweep: TrainingSweep,
    trials: list[Trial],
    now: datetime,
    ending: Ending,
    stopping: Collection[str],
    *,
    sweeping: sweeper.Sweeping | None = None,
) -> TrainingSweepStatus:
    """The status to write: the trials listed as summary.compacted keeps them (the best, and the pruned ones whose
    jobs are still to stop, always listed), the older finished ones summarised."""
    old = sweep.status or TrainingSweepStatus()
    phase = ending[0] if ending else (SweepPhase.RUNNING if trials else SweepPhase.PENDING)
    top = best(trials, sweep.spec.objective.goal)
    keep = {t.number for t in trials if t.job_name in stopping} | ({top.number} if top else set())
    started = _started(trials, old.summarised)
    listed, summary = compacted(sweep.spec, trials, old.summarised, keep)
    state = sweeping.state if sweeping else old.sweeper
    reason, message = (ending[1], ending[2]) if ending else _running(sweep, trials, started, state)
    conditions = _conditions(old.conditions, phase, reason, message, now)
    return old.model_copy(
        update={
            "phase": phase,
            "conditions": conditions,
            "observed_generation": sweep.metadata.generation,
            "trials": listed,
            "summarised": summary,
            "counts": counts(listed, summary),
            "checkpoints_removed": checkpoints.removed(listed, summary),
            "best_trial": top,
            "sweeper": state,
            "start_time": old.start_time or (now if trials else None),
            "completion_time": old.completion_time or (now if ending else None),
        }
    )


def _running(sweep: TrainingSweep, trials: Sequence[Trial], started: int, state: Sweeper | None) -> tuple[str, str]:
    """The Running condition's reason and message: trials running, or (all finished) the last folders going."""
    if not all(t.phase.is_finished for t in trials) or started < trial_budget(sweep.spec):
        return "TrialsRunning", _running_message(sweep, trials, started)
    if state is None or state.phase != SweeperPhase.RUNNING:
        return "RemovingCheckpoints", f"all {started} trials finished; their checkpoint folders go after their grace"
    return (
        "RemovingCheckpoints",
        f"all {started} trials finished; {state.job_name} removes {len(state.folders)} folders",
    )


def _running_message(sweep: TrainingSweep, trials: Sequence[Trial], started: int) -> str:
    active = sum(not t.phase.is_finished for t in trials)
    suspended = " (suspended: no new trials)" if sweep.spec.suspend else ""
    return f"{started} of {trial_budget(sweep.spec)} trials started, {active} running{suspended}"


def _conditions(
    old: Sequence[SweepCondition], phase: SweepPhase, reason: str, message: str, now: datetime
) -> list[SweepCondition]:
    """The condition of the phase True with the current reason; the others False once they have been True."""
    previous = {c.type: c for c in old}
    result = []
    for kind in SweepConditionType:
        holds = kind.value == phase.value
        before = previous.get(kind)
        status = ConditionStatus.TRUE if holds else ConditionStatus.FALSE
        if before is None and not holds:
            continue
        if before is not None and before.status == status and not holds:
            result.append(before)
            continue
        since = before.last_transition_time if before is not None and before.status == status else now
        result.append(
            SweepCondition(type=kind, status=status, reason=reason, message=message, last_transition_time=since)
        )
    return result
