"""Which parameters the next trials run with: a grid in a seeded order, or Optuna's random or TPE sampler asked
with every earlier trial told.

A grid's order is one seeded permutation of all its combinations, whatever maxTrials says, so raising maxTrials
continues it; the next trials take the first combinations in that order that no trial has run yet, so no
combination runs twice, even for a sweep whose earlier trials followed another order. Trials the status summarised
(the oldest finished ones, see sweep.summary) are known by number only: trial k took the order's position k (the
first free one when it started; not so for trials started before this order, whose combinations a summary loses)."""

import hashlib
from collections.abc import Iterator, Sequence

from trainingjob.model.sweep import Algorithm, TrainingSweepSpec
from trainingjob.model.sweep_space import Value
from trainingjob.model.sweep_status import Trial
from trainingjob.sweep.space import distributions, grid_point, grid_size
from trainingjob.sweep.study import Known, rebuilt


def trial_budget(spec: TrainingSweepSpec) -> int:
    """How many trials the sweep runs in all: maxTrials, or every combination of a smaller grid."""
    if spec.search.algorithm == Algorithm.GRID:
        return min(spec.max_trials, grid_size(spec.parameters))
    return spec.max_trials


FEISTEL_ROUNDS = 4


def _feistel(value: int, half_bits: int, seed: int) -> int:
    """A seeded bijection of [0, 2**(2*half_bits)): a balanced Feistel network whose rounds hash the seed."""
    mask = (1 << half_bits) - 1
    left, right = value >> half_bits, value & mask
    for round_number in range(FEISTEL_ROUNDS):
        digest = hashlib.blake2b(f"{seed}:{round_number}:{right}".encode(), digest_size=8).digest()
        left, right = right, left ^ (int.from_bytes(digest, "big") & mask)
    return (left << half_bits) | right


def grid_position(size: int, seed: int, position: int) -> int:
    """The combination at `position` of the grid's seeded permutation (a bijection of [0, size)): the Feistel
    network's, walked until it lands inside the grid. Never materialised, so a grid of any size costs nothing."""
    half_bits = max(1, ((size - 1).bit_length() + 1) // 2)
    index = _feistel(position, half_bits, seed)
    while index >= size:
        index = _feistel(index, half_bits, seed)
    return index


def grid_order(spec: TrainingSweepSpec) -> Iterator[int]:
    """The grid's combinations in the order trials take them: the sweep seed's permutation of the whole grid."""
    size = grid_size(spec.parameters)
    return (grid_position(size, spec.search.seed, position) for position in range(size))


def _point_key(values: dict[str, Value]) -> tuple[tuple[str, Value], ...]:
    return tuple(sorted(values.items()))


def _next_grid_points(
    spec: TrainingSweepSpec, trials: Sequence[Trial], count: int, summarised: int
) -> list[dict[str, Value]]:
    """The first `count` combinations in the grid's order that no trial has run, within the trial budget."""
    count = min(count, trial_budget(spec) - len(trials) - summarised)
    taken = {_point_key(t.parameters) for t in trials}
    listed, started = {t.number for t in trials}, len(trials) + summarised
    points: list[dict[str, Value]] = []
    for position, index in enumerate(grid_order(spec)):
        if len(points) >= count:
            break
        if position < started and position not in listed:
            continue  # a summarised trial's: trial k took position k (the first one free when it started)
        point = grid_point(spec.parameters, index)
        if _point_key(point) not in taken:
            points.append(point)
    return points


def next_parameters(
    spec: TrainingSweepSpec,
    trials: Sequence[Trial],
    count: int,
    summarised: int = 0,
    learned: Sequence[Known] = (),
) -> list[dict[str, Value]]:
    """Parameters for the next `count` trials (numbered from len(trials) + summarised, the trials the status no
    longer lists, which TPE knows from their records, `learned`): each drawn as if the ones before it, these
    included, were running."""
    if spec.search.algorithm == Algorithm.GRID:
        return _next_grid_points(spec, trials, count, summarised)
    first = len(trials) + summarised
    space = distributions(spec.parameters)
    drawn: list[dict[str, Value]] = []
    known: list[Known] = [*(learned if spec.search.algorithm == Algorithm.TPE else ()), *trials]
    for number in range(first, first + count):
        study = rebuilt(spec, known, number, curves=False)
        values = dict(study.ask(space).params)
        drawn.append(values)
        known.append(Trial(number=number, job_name="", parameters=values))
    return drawn
