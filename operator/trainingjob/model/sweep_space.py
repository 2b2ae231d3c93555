"""A sweep's search space: parameters, each naming a field of the trial template and the values it may take."""

import math
from enum import StrEnum
from typing import Annotated

from pydantic import Field, StrictBool, StrictFloat, StrictInt, StrictStr
from pydantic.json_schema import WithJsonSchema

from trainingjob.model.base import Bool, Float, RuledModel, Str
from trainingjob.model.rules import Reason, Rule

MAX_CHOICES = 64
MAX_GRID_POINTS = 10_000  # a Float or Int parameter's values in a grid
PARAMETER_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,62}$"
# A field of the trial template's spec: one of the built-in trainer's settings, a key of the entrypoint's free-form
# config (nested keys with dots), or a role's replica count.
PARAMETER_PATH = (
    r"^(trainer\.[A-Za-z][A-Za-z0-9]*|trainer\.config(\.[A-Za-z0-9_-]+)+"
    r"|workers\.replicas|parameterServers\.replicas)$"
)

# A categorical value: a string, a whole number, a number or a boolean, as YAML writes it.
Choice = Annotated[
    StrictBool | StrictInt | StrictFloat | StrictStr,
    WithJsonSchema({"x-kubernetes-preserve-unknown-fields": True}),
]
Value = Choice


class ParameterType(StrEnum):
    FLOAT = "Float"
    INT = "Int"
    CATEGORICAL = "Categorical"


def _bounded(p: "Parameter") -> bool:
    is_range = p.type != ParameterType.CATEGORICAL
    return is_range == (p.min is not None and p.max is not None) and is_range == (p.values is None)


def _ordered(p: "Parameter") -> bool:
    return p.min is None or p.max is None or p.min < p.max


def _whole(p: "Parameter") -> bool:
    bounds = [b for b in (p.min, p.max, p.step) if b is not None]
    return p.type != ParameterType.INT or all(float(b).is_integer() for b in bounds)


def _log_positive(p: "Parameter") -> bool:
    return not p.log or (p.min is not None and p.min > 0)


def _grid_size(p: "Parameter") -> bool:
    return p.step is None or p.min is None or p.max is None or (p.max - p.min) / p.step < MAX_GRID_POINTS


class Parameter(RuledModel):
    """One dimension of the search: a field of the template and the values it may take."""

    name: Annotated[Str, Field(pattern=PARAMETER_NAME)]
    """A short name for tables and plots, e.g. lr."""
    path: Annotated[Str, Field(pattern=PARAMETER_PATH, max_length=253)]
    """The field of the template's spec it sets: trainer.learningRate, trainer.batchSize, trainer.optimizer,
    trainer.config.<key>[.<key>...] (your entrypoint's settings), workers.replicas or parameterServers.replicas."""
    type: ParameterType
    """Float or Int (a range from min to max) or Categorical (one of values)."""
    min: Float | None = None
    """Float and Int: the least value."""
    max: Float | None = None
    """Float and Int: the greatest value."""
    log: Bool = False
    """Float and Int: sample on a log scale (min must be above 0)."""
    step: Annotated[Float, Field(gt=0)] | None = None
    """Float and Int: values are min + k x step; a Grid search needs it on Float parameters (Int ones step by 1)."""
    values: Annotated[list[Choice], Field(min_length=1, max_length=MAX_CHOICES)] | None = None
    """Categorical: the values to choose from."""

    cross_field_rules = (
        Rule(  # CEL cannot see values (a list of untyped scalars): the model checks them, the apiserver min and max
            field="type",
            cel="(self.type == 'Categorical') == (!has(self.min) && !has(self.max))",
            message="a Float or Int parameter needs min and max (and no values); a Categorical one needs values"
            " (and no min or max)",
            reason=Reason.REQUIRED,
            holds=_bounded,
        ),
        Rule(
            field="max",
            cel="!has(self.min) || !has(self.max) || self.min < self.max",
            message="max must be greater than min",
            reason=Reason.INVALID,
            holds=_ordered,
        ),
        Rule(
            field="min",
            cel="!self.log || (has(self.min) && self.min > 0.0)",
            message="a log-scale parameter needs min above 0",
            reason=Reason.INVALID,
            holds=_log_positive,
        ),
        Rule(
            field="step",
            cel="!self.log || !has(self.step)",
            message="step cannot be combined with log",
            reason=Reason.FORBIDDEN,
            holds=lambda p: not (p.log and p.step is not None),
        ),
        Rule(
            field="step",
            cel=f"!has(self.step) || !has(self.min) || !has(self.max) || (self.max - self.min) / self.step"
            f" < {MAX_GRID_POINTS}.0",
            message=f"step gives {MAX_GRID_POINTS} or more values between min and max",
            reason=Reason.INVALID,
            holds=_grid_size,
        ),
        Rule(
            field="min",
            cel="self.type != 'Int' || [has(self.min) ? self.min : 0.0, has(self.max) ? self.max : 0.0,"
            " has(self.step) ? self.step : 1.0].all(b, double(int(b)) == b)",
            message="an Int parameter's min, max and step must be whole numbers",
            reason=Reason.INVALID,
            holds=_whole,
        ),
    )

    @property
    def is_finite(self) -> bool:
        """Whether a grid can list its values."""
        return self.type != ParameterType.FLOAT or self.step is not None

    def grid(self) -> list[Value]:
        """Every value, in order: the choices, or min, min + step, ... up to max."""
        if self.values is not None:
            return list(self.values)
        assert self.min is not None and self.max is not None
        step = self.step or 1.0
        count = math.floor((self.max - self.min) / step + 1e-9) + 1
        points: list[Value] = [self.min + k * step for k in range(count)]
        return [round(float(v)) for v in points] if self.type == ParameterType.INT else points
