"""A trial's parameters filled into the template's spec, and whether the result is a valid TrainingJob spec."""

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from trainingjob.model.spec import TrainingJobSpec
from trainingjob.model.sweep_space import Parameter, ParameterType, Value

Parameters = Mapping[str, Value]


def _set(target: dict[str, Any], path: str, value: Value) -> None:
    *parents, leaf = path.split(".")
    for key in parents:
        child = target.get(key)
        if not isinstance(child, dict):
            child = target[key] = {}
        target = child
    target[leaf] = value


def filled_spec(template: Mapping[str, Any], parameters: Sequence[Parameter], values: Parameters) -> dict[str, Any]:
    """The template's spec (camelCase, as in a manifest) with each parameter's value at its path."""
    spec = copy.deepcopy(dict(template))
    for parameter in parameters:
        if parameter.name in values:
            _set(spec, parameter.path, values[parameter.name])
    return spec


def spec_problem(template: Mapping[str, Any], parameters: Sequence[Parameter], values: Parameters) -> str:
    """Why the template filled with these values is not a valid TrainingJob spec ("" when it is), naming the
    parameters whose fields are wrong."""
    try:
        TrainingJobSpec.model_validate(filled_spec(template, parameters, values), by_alias=True, by_name=False)
    except ValidationError as error:
        return "; ".join(_explain(e, parameters) for e in error.errors())
    return ""


def _explain(error: Any, parameters: Sequence[Parameter]) -> str:
    location = ".".join(str(part) for part in error["loc"])
    named = [p.name for p in parameters if location == p.path or location.startswith(p.path + ".")]
    who = f"parameter {named[0]} ({location})" if named else f"spec.template.spec.{location}"
    return f"{who}: {error['msg']}"


def extremes(parameter: Parameter) -> list[Value]:
    """The values that bound what a parameter can set: its range's ends, or every choice."""
    if parameter.values is not None:
        return list(parameter.values)
    assert parameter.min is not None and parameter.max is not None
    ends: list[Value] = [parameter.min, parameter.max]
    return [int(v) for v in ends] if parameter.type == ParameterType.INT else ends


def space_problems(template: Mapping[str, Any], parameters: Sequence[Parameter]) -> dict[int, str]:
    """By index, each parameter whose own extreme values (a range's ends, every choice) do not fill the template
    into a valid spec, with why: caught when the sweep is submitted, not when its first trial would run."""
    problems = {}
    for index, parameter in enumerate(parameters):
        for value in extremes(parameter):
            problem = spec_problem(template, [parameter], {parameter.name: value})
            if problem:
                problems[index] = f"{parameter.name}={value!r} makes an invalid job: {problem}"
                break
    return problems
