"""Which running trials to stop early, given every listed trial's evaluation curve: the median rule as Optuna's
MedianPruner decides it, from the per-step medians of the succeeded trials computed once per reconcile (asking Optuna
trial by trial and step by step costs trials x steps x succeeded trials); successive halving by Optuna's pruner on
the study rebuilt from the trials. Both see every finished trial: those listed, and the summarised ones' records
(sweep/learned.py)."""

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import optuna
from optuna.trial import FrozenTrial

from trainingjob.model.sweep import EarlyStopping, Goal, PruningAlgorithm, TrainingSweepSpec
from trainingjob.model.sweep_status import Trial, TrialPhase
from trainingjob.sweep.learned import Learned
from trainingjob.sweep.study import NUMBER, Known, rebuilt

REASONS = {PruningAlgorithm.MEDIAN: "PrunedByMedian", PruningAlgorithm.SUCCESSIVE_HALVING: "PrunedBySuccessiveHalving"}


@dataclass(frozen=True)
class Pruned:
    """A trial to stop, and why, in words."""

    number: int
    reason: str
    message: str


def to_prune(
    spec: TrainingSweepSpec, trials: Sequence[Trial], summarised_succeeded: int = 0, learned: Sequence[Known] = ()
) -> list[Pruned]:
    """The running trials whose evaluations trail the others by the early-stopping rule (`summarised_succeeded`:
    the succeeded trials the status no longer lists, which count towards startupTrials; `learned`: those of them
    the status keeps a record of, compared with as the listed ones are)."""
    stopping = spec.early_stopping
    running = [t for t in trials if t.phase == TrialPhase.RUNNING and t.curve and not at_its_end(t)]
    if stopping is None or not running:
        return []
    if stopping.algorithm == PruningAlgorithm.MEDIAN:
        done = [t for t in [*learned, *trials] if t.phase == TrialPhase.SUCCEEDED and t.objective is not None]
        recorded = sum(t.phase == TrialPhase.SUCCEEDED for t in learned)
        return _by_median(spec, stopping, done, running, summarised_succeeded - recorded)
    known: list[Known] = [*learned, *trials]
    steps = sorted({step for trial in known for step in _points(trial)[0]})
    study = rebuilt(spec, known, len(known), steps, curves=False)  # the pruner reads the others' rungs alone
    by_number = {t.user_attrs[NUMBER]: t for t in study.trials}
    verdicts = []
    for trial in running:
        frozen = by_number.get(trial.number)
        own_steps = [point.step for point in trial.curve]
        step = _pruned_at(study, frozen, own_steps) if frozen is not None else None
        if frozen is not None and step is not None:
            verdicts.append(_verdict(spec, stopping, trial.number, step, frozen.intermediate_values[step]))
    return verdicts


def _verdict(spec: TrainingSweepSpec, stopping: EarlyStopping, number: int, step: int, value: float) -> Pruned:
    message = (
        f"{spec.objective.metric} {value:.6g} near step {step} trailed the other trials"
        f" ({stopping.algorithm.value} rule): stopped early"
    )
    return Pruned(number, REASONS[stopping.algorithm], message)


def _by_median(
    spec: TrainingSweepSpec, stopping: EarlyStopping, succeeded: Sequence[Known], running: Sequence[Trial], earlier: int
) -> list[Pruned]:
    """MedianPruner's verdicts, every trial's curve taken at every step any trial was evaluated at (its latest
    evaluation at or before it: trials rarely share steps, and the rule compares them step by step). A running trial
    is stopped at the first of its own evaluations, past warmupSteps, where its best value so far trails the median
    of the succeeded trials' values there (at least startupTrials of them there, and startupTrials succeeded in
    all). The medians are taken once, at the running trials' steps only."""
    done = [t for t in succeeded if t.curve]
    if not done or len(succeeded) + earlier < stopping.startup_trials:
        return []
    maximize = spec.objective.goal == Goal.MAXIMIZE
    steps = sorted({point.step for trial in running for point in trial.curve if point.step >= stopping.warmup_steps})
    medians = _medians(done, steps, max(stopping.startup_trials, 1))
    verdicts = []
    for trial in running:
        best = None
        for point in trial.curve:
            best = point.value if best is None else (max if maximize else min)(best, point.value)
            median = medians.get(point.step)
            if median is not None and (best < median if maximize else best > median):
                verdicts.append(_verdict(spec, stopping, trial.number, point.step, point.value))
                break
    return verdicts


def _medians(done: Sequence[Known], steps: Sequence[int], least: int) -> dict[int, float]:
    """At each of `steps` (ascending), the median (numpy's 50th percentile) of the trials' values there, each
    trial's latest evaluation at or before it, up to its last; where at least `least` trials have one."""
    values: dict[int, list[float]] = defaultdict(list)
    for trial in done:
        own, evaluated = _points(trial)
        for step in steps:
            if step > own[-1]:
                break
            at = bisect_right(own, step) - 1
            if at >= 0:
                values[step].append(evaluated[at])
    return {step: float(np.percentile(found, 50)) for step, found in values.items() if len(found) >= least}


def _points(trial: Known) -> tuple[Sequence[int], Sequence[float]]:
    """A trial's curve as its steps and its values (a record keeps them so: no point is made for it)."""
    if isinstance(trial, Learned):
        return trial.steps, trial.values
    return [point.step for point in trial.curve], [point.value for point in trial.curve]


def at_its_end(trial: Trial) -> bool:
    """The trial's job has run its last step (or evaluated there): it is finishing, not to be stopped early."""
    if trial.total_steps is None:
        return False
    return max(trial.step or 0, trial.objective_step or 0) >= trial.total_steps


def _pruned_at(study: optuna.Study, trial: FrozenTrial, steps: list[int]) -> int | None:
    """Successive halving's verdict at the trial's latest evaluation (it keeps its rungs in the study): the step it
    would stop the trial at, or None."""
    return steps[-1] if study.pruner.prune(study, trial) else None
