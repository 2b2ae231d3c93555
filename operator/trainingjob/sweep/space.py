"""The search space as Optuna sees it, and as a grid."""

import math
from collections.abc import Sequence

from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution

from trainingjob.model.sweep_space import Parameter, ParameterType, Value


def distribution(parameter: Parameter) -> BaseDistribution:
    """The Optuna distribution a parameter's values are drawn from."""
    if parameter.values is not None:
        return CategoricalDistribution(parameter.values)
    assert parameter.min is not None and parameter.max is not None  # the model's rules hold
    if parameter.type == ParameterType.INT:
        step = int(parameter.step or 1)
        return IntDistribution(int(parameter.min), int(parameter.max), log=parameter.log, step=step)
    return FloatDistribution(parameter.min, parameter.max, log=parameter.log, step=parameter.step)


def distributions(parameters: Sequence[Parameter]) -> dict[str, BaseDistribution]:
    return {p.name: distribution(p) for p in parameters}


def grid_size(parameters: Sequence[Parameter]) -> int:
    """The number of combinations of a grid over every parameter's values."""
    return math.prod(len(p.grid()) for p in parameters)


def grid_point(parameters: Sequence[Parameter], index: int) -> dict[str, Value]:
    """The combination number `index` (0 <= index < grid_size), the last parameter varying fastest."""
    point: dict[str, Value] = {}
    for parameter in reversed(parameters):
        values = parameter.grid()
        index, position = divmod(index, len(values))
        point[parameter.name] = values[position]
    return {p.name: point[p.name] for p in parameters}
