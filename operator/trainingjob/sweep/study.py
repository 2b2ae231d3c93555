"""An Optuna study rebuilt from the sweep's trials on every reconcile: the operator keeps no study database, so it
can be killed at any moment and the next reconcile knows what the last one knew."""

import logging
from collections.abc import Sequence

import optuna
from optuna.distributions import BaseDistribution
from optuna.pruners import BasePruner, MedianPruner, NopPruner, SuccessiveHalvingPruner
from optuna.samplers import BaseSampler, RandomSampler, TPESampler
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState, create_trial

from trainingjob.model.sweep import Algorithm, EarlyStopping, Goal, PruningAlgorithm, TrainingSweepSpec
from trainingjob.model.sweep_status import Trial, TrialPhase
from trainingjob.sweep.space import distributions

optuna.logging.set_verbosity(logging.WARNING)
NUMBER = "number"  # the user attribute holding our trial number (Optuna numbers only the trials it was told)
_STATES = {
    TrialPhase.PENDING: TrialState.RUNNING,
    TrialPhase.RUNNING: TrialState.RUNNING,
    TrialPhase.SUCCEEDED: TrialState.COMPLETE,
    TrialPhase.FAILED: TrialState.FAIL,
    TrialPhase.PRUNED: TrialState.PRUNED,
}


def sampler(spec: TrainingSweepSpec, number: int) -> BaseSampler:
    """The sampler that draws trial `number`: seeded by the sweep's seed and the number, so a reconcile that asks
    again for the same trial from the same history gets the same parameters."""
    seed = (spec.search.seed * 1_000_003 + number) % 2**32
    if spec.search.algorithm == Algorithm.TPE:
        return TPESampler(seed=seed, n_startup_trials=spec.search.startup_trials)
    return RandomSampler(seed=seed)


def pruner(stopping: EarlyStopping | None) -> BasePruner:
    if stopping is None:
        return NopPruner()
    if stopping.algorithm == PruningAlgorithm.MEDIAN:
        return MedianPruner(  # a median of at least startupTrials trials' values at the step judged
            n_startup_trials=stopping.startup_trials,
            n_warmup_steps=stopping.warmup_steps,
            n_min_trials=max(stopping.startup_trials, 1),
        )
    return SuccessiveHalvingPruner(
        min_resource=stopping.min_steps or "auto", reduction_factor=stopping.reduction_factor
    )


def frozen(trial: Trial, space: dict[str, BaseDistribution]) -> FrozenTrial | None:
    """The trial as Optuna records it; None when its parameters no longer fit the space (they always should)."""
    state = _STATES[trial.phase]
    if state == TrialState.COMPLETE and trial.objective is None:
        state = TrialState.FAIL
    try:
        return create_trial(
            state=state,
            value=trial.objective if state == TrialState.COMPLETE else None,
            params=dict(trial.parameters),
            distributions={name: space[name] for name in trial.parameters if name in space},
            intermediate_values={point.step: point.value for point in trial.curve},
            user_attrs={NUMBER: trial.number},
        )
    except ValueError:
        return None


def rebuilt(spec: TrainingSweepSpec, trials: Sequence[Trial], number: int) -> optuna.Study:
    """A study holding every trial so far, in number order, ready to ask for trial `number`."""
    direction = StudyDirection.MINIMIZE if spec.objective.goal == Goal.MINIMIZE else StudyDirection.MAXIMIZE
    study = optuna.create_study(direction=direction, sampler=sampler(spec, number), pruner=pruner(spec.early_stopping))
    space = distributions(spec.parameters)
    study.add_trials([t for t in (frozen(trial, space) for trial in sorted(trials, key=_number)) if t is not None])
    return study


def _number(trial: Trial) -> int:
    return trial.number
