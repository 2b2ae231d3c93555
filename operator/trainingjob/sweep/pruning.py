"""Which running trials to stop early: Optuna's pruner asked about each, given every trial's evaluation curve."""

from collections.abc import Sequence
from dataclasses import dataclass

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
    """The running trials whose latest evaluation trails the others by the early-stopping rule."""
    stopping = spec.early_stopping
    running = [t for t in trials if t.phase == TrialPhase.RUNNING and t.curve]
    if stopping is None or not running:
        return []
    study = rebuilt(spec, trials, len(trials))
    by_number = {t.user_attrs[NUMBER]: t for t in study.trials}
    verdicts = []
    for trial in running:
        frozen = by_number.get(trial.number)
        if frozen is not None and study.pruner.prune(study, frozen):
            last = trial.curve[-1]
            verdicts.append(
                Pruned(
                    trial.number,
                    REASONS[stopping.algorithm],
                    f"{spec.objective.metric} {last.value:.6g} at step {last.step} trails the other trials"
                    f" ({stopping.algorithm.value} rule): stopped early",
                )
            )
    return verdicts
