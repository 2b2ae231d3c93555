"""Which running trials to stop early: Optuna's pruner asked about each, given every trial's evaluation curve."""

from collections.abc import Sequence
from dataclasses import dataclass

import optuna
from optuna.trial import FrozenTrial, TrialState, create_trial

from trainingjob.model.sweep import PruningAlgorithm, TrainingSweepSpec
from trainingjob.model.sweep_status import Trial, TrialPhase
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
    running = [t for t in trials if t.phase == TrialPhase.RUNNING and t.curve]
    if stopping is None or not running:
        return []
    study = rebuilt(spec, trials, len(trials))
    by_number = {t.user_attrs[NUMBER]: t for t in study.trials}
    verdicts = []
    for trial in running:
        frozen = by_number.get(trial.number)
        step = _pruned_at(study, frozen, stopping.algorithm) if frozen is not None else None
        if frozen is not None and step is not None:
            value = frozen.intermediate_values[step]
            message = (
                f"{spec.objective.metric} {value:.6g} at step {step} trailed the other trials"
                f" ({stopping.algorithm.value} rule): stopped early"
            )
            verdicts.append(Pruned(trial.number, REASONS[stopping.algorithm], message))
    return verdicts


def _pruned_at(study: optuna.Study, trial: FrozenTrial, algorithm: PruningAlgorithm) -> int | None:
    """The first step at which the pruner would have stopped the trial, or None. The median rule is asked at every
    step reported so far (evaluations can arrive faster than reconciles, and it compares trials step by step);
    successive halving, which keeps its rungs in the study, only at the latest."""
    steps = sorted(trial.intermediate_values)
    if algorithm != PruningAlgorithm.MEDIAN:
        return steps[-1] if study.pruner.prune(study, trial) else None
    for index, step in enumerate(steps):
        values = {s: trial.intermediate_values[s] for s in steps[: index + 1]}
        prefix = create_trial(
            state=TrialState.RUNNING, params=trial.params, distributions=trial.distributions, intermediate_values=values
        )
        if study.pruner.prune(study, prefix):
            return step
    return None
