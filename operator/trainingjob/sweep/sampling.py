"""Which parameters the next trials run with: a grid in a seeded order, or Optuna's random or TPE sampler asked
with every earlier trial told."""

import random
from collections.abc import Sequence

from trainingjob.model.sweep import Algorithm, TrainingSweepSpec
from trainingjob.model.sweep_space import Value
from trainingjob.model.sweep_status import Trial
from trainingjob.sweep.space import distributions, grid_point, grid_size
from trainingjob.sweep.study import rebuilt


def trial_budget(spec: TrainingSweepSpec) -> int:
    """How many trials the sweep runs in all: maxTrials, or every combination of a smaller grid."""
    if spec.search.algorithm == Algorithm.GRID:
        return min(spec.max_trials, grid_size(spec.parameters))
    return spec.max_trials


def grid_order(spec: TrainingSweepSpec) -> list[int]:
    """The grid's combinations in the order trials take them: all of them in order when the sweep runs the whole
    grid, else a seeded random sample of maxTrials of them (never a corner of the grid)."""
    size = grid_size(spec.parameters)
    if spec.max_trials >= size:
        return list(range(size))
    return random.Random(spec.search.seed).sample(range(size), spec.max_trials)


def next_parameters(spec: TrainingSweepSpec, trials: Sequence[Trial], count: int) -> list[dict[str, Value]]:
    """Parameters for the next `count` trials (numbered from len(trials)): each drawn as if the ones before it,
    these included, were running."""
    first = len(trials)
    if spec.search.algorithm == Algorithm.GRID:
        order = grid_order(spec)
        return [grid_point(spec.parameters, order[n]) for n in range(first, min(first + count, len(order)))]
    space = distributions(spec.parameters)
    drawn: list[dict[str, Value]] = []
    known = list(trials)
    for number in range(first, first + count):
        study = rebuilt(spec, known, number)
        values = dict(study.ask(space).params)
        drawn.append(values)
        known.append(Trial(number=number, job_name="", parameters=values))
    return drawn
