"""Which running trials to stop early: Optuna's pruner asked about each, given every trial's evaluation curve."""

from collections.abc import Sequence
from dataclasses import dataclass

import optuna
from optuna.trial import FrozenTrial, TrialState, create_trial

from trainingjob.model.sweep import PruningAlgorithm, TrainingSweepSpec
from trainingjob.model.sweep_status import ObjectivePoint, Trial, TrialPhase
from trainingjob.sweep.study import NUMBER, rebuilt

REASONS = {PruningAlgorithm.MEDIAN: "PrunedByMedian", PruningAlgorithm.SUCCESSIVE_HALVING: "PrunedBySuccessiveHalving"}


@dataclass(frozen=True)
class Pruned:
    """A trial to stop, and why, in words."""

    number: int
    reason: str
    message: str


def to_prune(spec: TrainingSweepSpec, trials: Sequence[Trial]) -> list[Pruned]:
    """The running trials whose evaluations trail the others by the early-stopping rule."""
    stopping = spec.early_stopping
    running = [t for t in trials if t.phase == TrialPhase.RUNNING and t.curve and not at_its_end(t)]
    if stopping is None or not running:
        return []
    study = rebuilt(spec, aligned(trials), len(trials))
    by_number = {t.user_attrs[NUMBER]: t for t in study.trials}
    verdicts = []
    for trial in running:
        frozen = by_number.get(trial.number)
        own_steps = [point.step for point in trial.curve]
        step = _pruned_at(study, frozen, stopping.algorithm, own_steps) if frozen is not None else None
        if frozen is not None and step is not None:
            value = frozen.intermediate_values[step]
            message = (
                f"{spec.objective.metric} {value:.6g} near step {step} trailed the other trials"
                f" ({stopping.algorithm.value} rule): stopped early"
            )
            verdicts.append(Pruned(trial.number, REASONS[stopping.algorithm], message))
    return verdicts


def at_its_end(trial: Trial) -> bool:
    """The trial's job has run its last step (or evaluated there): it is finishing, not to be stopped early."""
    if trial.total_steps is None:
        return False
    return max(trial.step or 0, trial.objective_step or 0) >= trial.total_steps


def aligned(trials: Sequence[Trial]) -> list[Trial]:
    """The trials with their curves at the same steps: every step any trial was evaluated at, up to each trial's
    last, its value there the trial's latest evaluation at or before it. A job's status keeps the evaluations its
    reconciles saw, so two trials rarely share steps, and the rules compare trials step by step: a trial would be
    measured against whichever few had an evaluation seen at exactly its step."""
    steps = sorted({point.step for trial in trials for point in trial.curve})
    result = []
    for trial in trials:
        points, seen, latest = list(trial.curve), 0, None
        filled = []
        for step in steps:
            while seen < len(points) and points[seen].step <= step:
                latest, seen = points[seen], seen + 1
            if latest is not None and step <= points[-1].step:
                filled.append(ObjectivePoint(step=step, value=latest.value))
        result.append(trial.model_copy(update={"curve": filled}))
    return result


def _pruned_at(study: optuna.Study, trial: FrozenTrial, algorithm: PruningAlgorithm, steps: list[int]) -> int | None:
    """The first of `steps` (the trial's own evaluations) at which the pruner would have stopped it, or None. The
    median rule is asked at every one reported so far (evaluations can arrive faster than reconciles, and it
    compares trials step by step); successive halving, which keeps its rungs in the study, only at the latest."""
    if algorithm != PruningAlgorithm.MEDIAN:
        return steps[-1] if study.pruner.prune(study, trial) else None
    for step in steps:
        values = {s: v for s, v in trial.intermediate_values.items() if s <= step}
        prefix = create_trial(
            state=TrialState.RUNNING, params=trial.params, distributions=trial.distributions, intermediate_values=values
        )
        if study.pruner.prune(study, prefix):
            return step
    return None
