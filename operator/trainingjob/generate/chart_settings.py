"""The chart's `operator.settings`, generated from OperatorSettings, the one source of the operator's setting names,
defaults, bounds and descriptions: the block of values.yaml, its part of values.schema.json, and the environment
variable each becomes (the Deployment template derives it from the key). `python -m trainingjob.generate.chart_settings`
rewrites both files; tests/unit/test_chart.py fails when they drift."""

import json
import sys
import textwrap
import typing
from pathlib import Path
from typing import Any

from annotated_types import Ge, Gt, Le, MaxLen
from pydantic.alias_generators import to_camel
from pydantic.fields import FieldInfo

from trainingjob.settings import OperatorSettings

CHART = Path(__file__).resolve().parents[3] / "charts" / "trainingjob-operator"
# Settings the chart sets from other values (or leaves at their default), so not in operator.settings.
ELSEWHERE = {
    "namespace": "operator.watchNamespace",
    "metrics_port": "operator.metricsPort",
    "leader_election": "operator.leaderElection",
    "lease_namespace": "the release's namespace",
    "lease_name": "its default",
    "key_file": "the chart's own key Secret (templates/operator-key.yaml)",
}
BLOCK_START = "  settings:\n"
BLOCK_END = "  # -- More environment variables for the operator container"
# `helm --set` passes 0.5 as a string: seconds are a positive number or a positive decimal string.
POSITIVE_DECIMAL = r"^(0*[1-9][0-9]*(\.[0-9]+)?|0*\.[0-9]*[1-9][0-9]*|0+\.[0-9]*[1-9][0-9]*)$"
WIDTH = 116


def chart_fields() -> dict[str, FieldInfo]:
    """The settings in operator.settings, by their Python name, in the model's order."""
    return {name: f for name, f in OperatorSettings.model_fields.items() if name not in ELSEWHERE}


def env_name(name: str) -> str:
    return f"TJ_OPERATOR_{name.upper()}"


def schema_of(field: FieldInfo) -> dict[str, Any]:
    """The JSON schema of one setting's value, with the model's bounds."""
    kind = field.annotation
    if typing.get_origin(kind) is typing.Literal:
        return {"enum": list(typing.get_args(kind))}
    bounds = {type(m): m for m in field.metadata}
    if kind is bool:
        return {"type": "boolean"}
    if kind is int:
        found: dict[str, Any] = {"type": "integer"}
        if Ge in bounds:
            found["minimum"] = bounds[Ge].ge
        if Le in bounds:
            found["maximum"] = bounds[Le].le
        return found
    if kind is float and Gt in bounds and bounds[Gt].gt == 0:
        number = {"type": "number", "exclusiveMinimum": 0}
        return {"anyOf": [number, {"type": "string", "pattern": POSITIVE_DECIMAL}]}
    if kind is str:
        found = {"type": "string"}
        pattern = next((getattr(m, "pattern", None) for m in field.metadata if hasattr(m, "pattern")), None)
        if pattern:
            found["pattern"] = pattern
        if MaxLen in bounds:
            found["maxLength"] = bounds[MaxLen].max_length
        return found
    raise TypeError(f"no chart schema for a setting of type {kind}")


def settings_schema() -> dict[str, Any]:
    """values.schema.json's operator.settings."""
    properties = {}
    for name, field in chart_fields().items():
        schema = schema_of(field)
        seconds = (
            " Seconds above 0: a number, or a decimal string (`--set` passes 0.5 so)." if "anyOf" in schema else ""
        )
        properties[to_camel(name)] = {**schema, "description": _describe(name, field) + seconds}
    return {"type": "object", "additionalProperties": False, "properties": properties}


def _describe(name: str, field: FieldInfo) -> str:
    return f"{env_name(name)}. {' '.join((field.description or '').split())}"


def _yaml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return json.dumps(value) if isinstance(value, str) and not value else str(value)


def values_block() -> str:
    """values.yaml's operator.settings block: each setting with its description as a comment."""
    lines = [BLOCK_START]
    for name, field in chart_fields().items():
        comment = textwrap.wrap(_describe(name, field), WIDTH - 6)
        lines += [f"    # {line}\n" for line in comment]
        lines.append(f"    {to_camel(name)}: {_yaml_value(field.default)}\n")
    return "".join(lines)


def rewritten_values(text: str) -> str:
    start, end = text.index(BLOCK_START), text.index(BLOCK_END)
    return text[:start] + values_block() + text[end:]


def rewritten_schema(text: str) -> str:
    schema = json.loads(text)
    schema["properties"]["operator"]["properties"]["settings"] = settings_schema()
    return json.dumps(schema, indent=2) + "\n"


def main() -> None:
    for name, rewrite in (("values.yaml", rewritten_values), ("values.schema.json", rewritten_schema)):
        path = CHART / name
        path.write_text(rewrite(path.read_text()))
        print(f"wrote {path.relative_to(CHART.parents[1])}", file=sys.stderr)


if __name__ == "__main__":
    main()
