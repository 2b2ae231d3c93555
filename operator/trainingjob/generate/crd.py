"""The TrainingJob and TrainingSweep CRDs, generated from the pydantic models: `python -m trainingjob.generate.crd`."""

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from trainingjob.model import CATEGORIES, GROUP, KIND, PLURAL, SHORT_NAMES, SINGULAR, VERSION, TrainingJob
from trainingjob.model.rules import VALIDATIONS
from trainingjob.model.sweep import SWEEP_KIND, SWEEP_PLURAL, SWEEP_SHORT_NAMES, SWEEP_SINGULAR, TrainingSweep

HEADER = "# Generated from operator/trainingjob/model by `make crds`; edit the model, not this file.\n"
_DROPPED = {"title", "$defs"}
_NULL = {"type": "null"}
_KEY_ORDER = {key: index for index, key in enumerate(("description", "type", "default", "required", "properties"))}

Schema = dict[str, Any]


def _merge(base: Schema, extra: Schema) -> Schema:
    """`extra` over `base`, concatenating their CEL rules."""
    merged = {**base, **extra}
    rules = [*base.get(VALIDATIONS, []), *extra.get(VALIDATIONS, [])]
    if rules:
        merged[VALIDATIONS] = rules
    return merged


def _inline(node: Schema, defs: dict[str, Schema]) -> Schema:
    """Resolve $ref and nullable anyOf, the two pydantic forms a structural schema cannot hold."""
    if "$ref" in node:
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        return _merge(_inline(defs[node["$ref"].split("/")[-1]], defs), siblings)
    variants = node.get("anyOf", [])
    if _NULL in variants:
        rest = [variant for variant in variants if variant != _NULL]
        siblings = {k: v for k, v in node.items() if k != "anyOf"}
        inner = rest[0] if len(rest) == 1 else {"anyOf": rest}
        return _merge(_inline(inner, defs), siblings)
    return node


def _key_rule(pattern: str, max_length: int) -> dict[str, str]:
    return {
        "rule": f"self.all(k, k.size() <= {max_length} && k.matches({json.dumps(pattern)}))",
        "message": f"every key must match {pattern} and have at most {max_length} characters",
    }


class _Dumper(yaml.SafeDumper):
    """Writes shared parts of the schema out in full instead of as YAML anchors and aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _properties(value: Any, node: Schema, defs: dict[str, Schema]) -> Schema:
    return {"properties": {name: structural(child, defs) for name, child in value.items()}}


def _items(value: Any, node: Schema, defs: dict[str, Schema]) -> Schema:
    return {"items": structural(value, defs)}


def _additional_properties(value: Any, node: Schema, defs: dict[str, Schema]) -> Schema:
    if isinstance(value, dict):
        return {"additionalProperties": structural(value, defs)}
    return {"x-kubernetes-preserve-unknown-fields": True} if value is True else {}


def _pattern_properties(value: Any, node: Schema, defs: dict[str, Schema]) -> Schema:
    """A map with checked keys: OpenAPI v3 has no patternProperties, so the key check becomes a CEL rule."""
    ((pattern, child),) = value.items()
    max_length = node.get("propertyNames", {}).get("maxLength", 253)
    return {"additionalProperties": structural(child, defs), VALIDATIONS: [_key_rule(pattern, max_length)]}


def _exclusive(bound: str) -> Callable[[Any, Schema, dict[str, Schema]], Schema]:
    """A number in JSON Schema 2020-12, a flag beside minimum or maximum in OpenAPI v3."""
    return lambda value, node, defs: {bound: value, f"exclusive{bound.title()}": True}


def _description(value: Any, node: Schema, defs: dict[str, Schema]) -> Schema:
    return {"description": " ".join(value.split())}


_CONVERTERS = {
    "properties": _properties,
    "items": _items,
    "additionalProperties": _additional_properties,
    "patternProperties": _pattern_properties,
    "exclusiveMinimum": _exclusive("minimum"),
    "exclusiveMaximum": _exclusive("maximum"),
    "description": _description,
}


def _converted(key: str, value: Any, node: Schema, defs: dict[str, Schema]) -> Schema:
    """The structural form of one keyword of a pydantic schema node (empty when it has none)."""
    if key in _DROPPED or key == "propertyNames" or (key == "default" and value is None):
        return {}  # propertyNames is folded into the key rule of patternProperties
    converter = _CONVERTERS.get(key)
    return converter(value, node, defs) if converter else {key: value}


def structural(node: Schema, defs: dict[str, Schema]) -> Schema:
    """A structural-schema copy of one pydantic JSON schema node and everything below it."""
    node = _inline(node, defs)
    out: Schema = {}
    for key, value in node.items():
        out = _merge(out, _converted(key, value, node, defs))
    return dict(sorted(out.items(), key=lambda item: _KEY_ORDER.get(item[0], len(_KEY_ORDER))))


def _root_schema(model: type[BaseModel], kind: str) -> Schema:
    pydantic_schema = model.model_json_schema(by_alias=True)
    root = structural(pydantic_schema, pydantic_schema.get("$defs", {}))
    properties = root["properties"]
    properties["apiVersion"] = {
        "type": "string",
        "description": f"The schema version, {GROUP}/{VERSION}.",
    }
    properties["kind"] = {"type": "string", "description": f"{kind}."}
    properties["metadata"] = {"type": "object"}
    root["required"] = ["spec"]
    return root


def _column(
    name: str, path: str, kind: str = "string", description: str = "", *, priority: int = 0
) -> dict[str, str | int]:
    """A printer column; priority 1 shows only with `kubectl get -o wide`."""
    column: dict[str, str | int] = {"name": name, "type": kind, "jsonPath": path}
    return column | ({"description": description} if description else {}) | ({"priority": priority} if priority else {})


PRINTER_COLUMNS = [
    _column("Phase", ".status.phase", description="Pending, Running, Restarting, Suspended, Succeeded, Failed"),
    _column("Mode", ".spec.mode", description="DDP or ParameterServer"),
    _column(
        "Workers", ".status.scale.workers", "string", "Worker pods running/wanted: fewer while an elastic job is shrunk"
    ),
    _column("Ready", ".status.workers.ready", "integer", "Worker pods running and ready"),
    _column("Attempt", ".status.attempt", "integer", "Current attempt; N+1 after N whole-job restarts"),
    _column("Step", ".status.progress.step", "integer", "Steps completed, as the trainer last reported"),
    _column("Progress", ".status.progress.percent", "integer", "Percent of the run's steps completed"),
    _column("Loss", ".status.progress.loss", "number", "Training loss at the last reported step"),
    # A string, not a date: kubectl shows a date as the time since it, and a time to come as <invalid>.
    _column(
        "ETA",
        ".status.progress.estimatedCompletionTime",
        description="When the trainer expects to finish, as it estimated at its last report",
        priority=1,
    ),
    _column(
        "Goodput",
        ".status.goodput.ratio",
        "number",
        "Share of the job's time, suspended time left out, spent in productive training",
        priority=1,
    ),
    _column("Age", ".metadata.creationTimestamp", "date"),
]


SWEEP_COLUMNS = [
    _column("Phase", ".status.phase", description="Pending, Running, Succeeded, Failed"),
    _column("Running", ".status.counts.running", "integer", "Trials running"),
    _column("Succeeded", ".status.counts.succeeded", "integer", "Trials that succeeded"),
    _column("Pruned", ".status.counts.pruned", "integer", "Trials stopped early"),
    _column("Failed", ".status.counts.failed", "integer", "Trials that failed"),
    _column("Best", ".status.bestTrial.objective", "number", "The best objective so far"),
    _column("Best trial", ".status.bestTrial.jobName", description="The TrainingJob of the best trial"),
    _column("Age", ".metadata.creationTimestamp", "date"),
]


@dataclass(frozen=True)
class Resource:
    """A custom resource of the project: its model and how kubectl names and lists it."""

    model: type[BaseModel]
    kind: str
    plural: str
    singular: str
    short_names: tuple[str, ...]
    columns: list[dict[str, str | int]]

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{GROUP}"

    @property
    def file_name(self) -> str:
        return f"{GROUP}_{self.plural}.yaml"


JOB = Resource(TrainingJob, KIND, PLURAL, SINGULAR, SHORT_NAMES, PRINTER_COLUMNS)
SWEEP = Resource(TrainingSweep, SWEEP_KIND, SWEEP_PLURAL, SWEEP_SINGULAR, SWEEP_SHORT_NAMES, SWEEP_COLUMNS)
RESOURCES = (JOB, SWEEP)  # published in crds/ and the chart
CRD_NAME, FILE_NAME = JOB.crd_name, JOB.file_name


def crd(resource: Resource = JOB) -> dict[str, Any]:
    """The CustomResourceDefinition of a resource (TrainingJob unless told), as a manifest."""
    version = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": _root_schema(resource.model, resource.kind)},
        "subresources": {"status": {}},
        "additionalPrinterColumns": resource.columns,
    }
    names = {
        "kind": resource.kind,
        "listKind": f"{resource.kind}List",
        "plural": resource.plural,
        "singular": resource.singular,
        "shortNames": list(resource.short_names),
        "categories": list(CATEGORIES),
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": resource.crd_name},
        "spec": {"group": GROUP, "names": names, "scope": "Namespaced", "versions": [version]},
    }


def render(resource: Resource = JOB) -> str:
    """The CRD as the YAML file in crds/."""
    return HEADER + yaml.dump(crd(resource), Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True)


def render_all() -> str:
    """Every CRD of the project, as one multi-document YAML stream (`tjctl crds | kubectl apply --server-side -f -`:
    client-side apply would copy each into an annotation, and they are larger than an annotation may be)."""
    return "---\n".join(render(resource) for resource in RESOURCES)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write the CRDs generated from the models.")
    parser.add_argument("--out", type=Path, default=Path("crds"), help="folder to write the CRDs into")
    arguments = parser.parse_args(argv)
    arguments.out.mkdir(parents=True, exist_ok=True)
    for resource in RESOURCES:
        (arguments.out / resource.file_name).write_text(render(resource))
        print(arguments.out / resource.file_name)


if __name__ == "__main__":
    main()
