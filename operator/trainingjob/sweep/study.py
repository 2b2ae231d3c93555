"""An Optuna study rebuilt from the sweep's trials on every reconcile: the operator keeps no study database, so it
can be killed at any moment and the next reconcile knows what the last one knew."""

import logging
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol

import optuna
from optuna.distributions import BaseDistribution
from optuna.pruners import BasePruner, MedianPruner, NopPruner, SuccessiveHalvingPruner
from optuna.pruners._successive_halving import _completed_rung_key  # the key its rungs are recorded under
from optuna.samplers import BaseSampler, RandomSampler, TPESampler
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from trainingjob.model.sweep import Algorithm, EarlyStopping, Goal, PruningAlgorithm, TrainingSweepSpec
from trainingjob.model.sweep_space import Value
from trainingjob.model.sweep_status import TrialPhase
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


class Point(Protocol):
    """A point of a curve: an ObjectivePoint, or a summarised trial's recorded one."""

    @property
    def step(self) -> int: ...

    @property
    def value(self) -> float: ...


class Known(Protocol):
    """A finished or running trial as the learners read it: a Trial the status lists, or the record of one it
    summarised (sweep/learned.py)."""

    @property
    def number(self) -> int: ...

    @property
    def phase(self) -> TrialPhase: ...

    @property
    def objective(self) -> float | None: ...

    @property
    def parameters(self) -> Mapping[str, Value]: ...

    @property
    def curve(self) -> Sequence[Point]: ...


def sampler(spec: TrainingSweepSpec, number: int) -> BaseSampler:
    """The sampler that draws trial `number`: seeded by the sweep's seed and the number, so a reconcile that asks
    again for the same trial from the same history gets the same parameters."""
    seed = (spec.search.seed * 1_000_003 + number) % 2**32
    if spec.search.algorithm == Algorithm.TPE:
        return TPESampler(seed=seed, n_startup_trials=spec.search.startup_trials)
    return RandomSampler(seed=seed)


def pruner(stopping: EarlyStopping | None, min_steps: int | None) -> BasePruner:
    """The early-stopping rule; successive halving with its first rung at `min_steps` (none yet when None)."""
    if stopping is None or (stopping.algorithm == PruningAlgorithm.SUCCESSIVE_HALVING and min_steps is None):
        return NopPruner()
    if stopping.algorithm == PruningAlgorithm.MEDIAN:
        return MedianPruner(  # a median of at least startupTrials trials' values at the step judged
            n_startup_trials=stopping.startup_trials,
            n_warmup_steps=stopping.warmup_steps,
            n_min_trials=max(stopping.startup_trials, 1),
        )
    return SuccessiveHalvingPruner(min_resource=min_steps or 1, reduction_factor=stopping.reduction_factor)


def first_rung(stopping: EarlyStopping | None, trials: Sequence[Known]) -> int | None:
    """Successive halving's first rung: minSteps, else (as Optuna estimates it) a hundredth of the most steps a
    succeeded trial was evaluated at; None before any trial succeeded, and for the other rules."""
    if stopping is None or stopping.algorithm != PruningAlgorithm.SUCCESSIVE_HALVING:
        return None
    if stopping.min_steps is not None:
        return stopping.min_steps
    lasts = [t.curve[-1].step for t in trials if t.phase == TrialPhase.SUCCEEDED and t.curve]
    return max(max(lasts) // 100, 1) if lasts else None


def rungs(trial: Known, first: int, reduction_factor: int, steps: Sequence[int] | None = None) -> dict[str, float]:
    """The rungs a trial has passed, as Optuna's pruner records them while a trial runs (the study is rebuilt, so
    they are rebuilt too): rung k's value is the trial's evaluation at the first of `steps` (ascending; its own
    when None) at or past step first x factor^k, from its first evaluation to its last: its latest evaluation at
    or before that step (every trial's curve taken at every step any trial was evaluated at, so trials evaluated
    at different steps meet at the same rungs). A running trial's latest evaluation is left out: that is the one
    being judged, so its rungs end before it."""
    curve = trial.curve
    own = [point.step for point in curve]
    if not own:
        return {}
    among = own if steps is None else steps
    passed: dict[str, float] = {}
    while True:
        at = bisect_left(among, max(first * reduction_factor ** len(passed), own[0]))
        if at == len(among) or among[at] > own[-1] or (among[at] == own[-1] and not trial.phase.is_finished):
            return passed
        passed[_completed_rung_key(len(passed))] = curve[bisect_right(own, among[at]) - 1].value


_TOLD_AT = datetime(2000, 1, 1)  # a rebuilt trial's start and end: the study never reads them


class _Told(FrozenTrial):
    """A trial built for one study alone: the study keeps it as it is (Optuna's in-memory storage copies every trial
    it is told, deeply: most of a 10,000-trial study's rebuild)."""

    def __deepcopy__(self, memo: dict[int, object]) -> "_Told":
        return self


def frozen(
    trial: Known, space: dict[str, BaseDistribution], attrs: dict[str, float], *, curve: bool = True
) -> FrozenTrial | None:
    """The trial as Optuna records it, with `attrs` as its system attributes; None when its parameters no longer
    fit the space (they always should). Built as optuna.trial.create_trial builds it, but from `space` as it is
    (create_trial converts every distribution again, comparing Categorical choices: most of its cost). Without
    `curve`, a completed trial's curve is left out: TPE reads a completed trial's objective alone (a pruned one's
    last evaluation)."""
    state = _STATES[trial.phase]
    if state == TrialState.COMPLETE and trial.objective is None:
        state = TrialState.FAIL
    found = _Told(
        number=-1,
        trial_id=-1,
        state=state,
        value=trial.objective if state == TrialState.COMPLETE else None,
        values=None,
        datetime_start=_TOLD_AT,
        datetime_complete=_TOLD_AT if state.is_finished() else None,
        params=dict(trial.parameters),
        distributions={name: space[name] for name in trial.parameters if name in space},
        user_attrs={NUMBER: trial.number},
        system_attrs=dict(attrs),
        intermediate_values={p.step: p.value for p in trial.curve} if curve or state != TrialState.COMPLETE else {},
    )
    try:
        found._validate()  # what create_trial checks: the parameters within their distributions
    except ValueError:
        return None
    return found


def rebuilt(
    spec: TrainingSweepSpec,
    trials: Sequence[Known],
    number: int,
    steps: Sequence[int] | None = None,
    *,
    curves: bool = True,
) -> optuna.Study:
    """A study holding every trial so far, in number order, ready to ask for trial `number`; successive halving's
    rungs taken at `steps` (see rungs); without `curves`, the completed trials' curves left out (for sampling)."""
    direction = StudyDirection.MINIMIZE if spec.objective.goal == Goal.MINIMIZE else StudyDirection.MAXIMIZE
    stopping = spec.early_stopping
    first = first_rung(stopping, trials)
    study = optuna.create_study(direction=direction, sampler=sampler(spec, number), pruner=pruner(stopping, first))
    space = distributions(spec.parameters)
    factor = stopping.reduction_factor if stopping else 0
    ordered = sorted(trials, key=_number)
    found = (frozen(t, space, rungs(t, first, factor, steps) if first else {}, curve=curves) for t in ordered)
    study.add_trials([t for t in found if t is not None])
    return study


def _number(trial: Known) -> int:
    return trial.number
