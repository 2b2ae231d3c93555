"""The generated CRD: no drift from crds/, a structural schema, descriptions everywhere, the model's rules."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from trainingjob.generate import crd
from trainingjob.model import ApiModel, TrainingJobSpec
from trainingjob.model.base import QUANTITY
from trainingjob.model.rules import VALIDATIONS
from trainingjob.model.sweep import TrainingSweepSpec

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[2]
Schema = dict[str, Any]


def _schema(resource: crd.Resource = crd.JOB) -> Schema:
    root: Schema = crd.crd(resource)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return root


# The structural checks hold for every resource, published or not yet (TrainingSweep).
each_resource = pytest.mark.parametrize("resource", [crd.JOB, crd.SWEEP], ids=lambda r: r.kind)


def _nodes(node: Schema, path: str = "") -> Iterator[tuple[str, Schema]]:
    yield path, node
    for name, child in node.get("properties", {}).items():
        yield from _nodes(child, f"{path}.{name}")
    if "items" in node:
        yield from _nodes(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _nodes(node["additionalProperties"], f"{path}{{}}")


def _model_types(model: type[ApiModel]) -> Iterator[type[ApiModel]]:
    yield model
    for field in model.model_fields.values():
        for candidate in _annotation_types(field.annotation):
            yield from _model_types(candidate)


def _annotation_types(annotation: Any) -> Iterator[type[ApiModel]]:
    if isinstance(annotation, type) and issubclass(annotation, ApiModel):
        yield annotation
    for argument in getattr(annotation, "__args__", ()):
        yield from _annotation_types(argument)


@pytest.mark.parametrize("resource", crd.RESOURCES, ids=lambda r: r.kind)
def test_committed_crd_matches_the_model(resource: crd.Resource) -> None:
    committed = (ROOT / "crds" / resource.file_name).read_text()
    assert committed == crd.render(resource), "crds/ is stale: run `make crds`"


def test_cli_writes_every_crd(tmp_path: Path) -> None:
    crd.main(["--out", str(tmp_path)])
    for resource in crd.RESOURCES:
        assert yaml.safe_load((tmp_path / resource.file_name).read_text()) == crd.crd(resource)


@each_resource
@pytest.mark.parametrize("key", ["title", "$ref", "$defs", "oneOf", "allOf", "const", "nullable", "uniqueItems"])
def test_schema_has_no_non_structural_keys(key: str, resource: crd.Resource) -> None:
    assert [path for path, node in _nodes(_schema(resource)) if key in node] == []


@each_resource
def test_every_node_is_typed(resource: crd.Resource) -> None:
    """Typed, or explicitly free: an int-or-string, or a sweep's categorical value (any scalar)."""
    free = ("x-kubernetes-int-or-string", "x-kubernetes-preserve-unknown-fields")
    untyped = [
        path for path, node in _nodes(_schema(resource)) if "type" not in node and not any(node.get(k) for k in free)
    ]
    assert untyped == []


@each_resource
def test_any_of_only_for_int_or_string(resource: crd.Resource) -> None:
    for path, node in _nodes(_schema(resource)):
        if "anyOf" in node:
            assert node.get("x-kubernetes-int-or-string") is True, path
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path


@each_resource
def test_every_field_has_a_description(resource: crd.Resource) -> None:
    missing = [path for path, node in _nodes(_schema(resource)) if path.count(".") > 1 and not node.get("description")]
    missing = [path for path in missing if not path.endswith(("[]", "{}"))]
    assert missing == []


def test_defaults_do_not_use_exclusive_numbers() -> None:
    for path, node in _nodes(_schema()):
        for key in ("exclusiveMinimum", "exclusiveMaximum"):
            assert node.get(key, True) is True, path


@pytest.mark.parametrize(
    ("resource", "spec"), [(crd.JOB, TrainingJobSpec), (crd.SWEEP, TrainingSweepSpec)], ids=["job", "sweep"]
)
def test_every_cross_field_rule_is_in_the_crd(resource: crd.Resource, spec: type[ApiModel]) -> None:
    in_crd = {rule["rule"] for _, node in _nodes(_schema(resource)) for rule in node.get(VALIDATIONS, [])}
    for model in _model_types(spec):
        for rule in getattr(model, "cross_field_rules", ()):
            assert rule.cel in in_crd, f"{model.__name__}: {rule.cel}"


@pytest.mark.parametrize(
    "path",
    [
        ".spec.mode",
        ".spec.workers.replicas",
        ".spec.workers.image",
        ".spec.workers.command",
        ".spec.workers.nprocPerPod",
        ".spec.parameterServers.replicas",
        ".spec.trainer",
        ".spec.checkpoint.volume",
        ".spec.checkpoint.path",
    ],
)
def test_immutable_fields_have_transition_rules(path: str) -> None:
    node = dict(_nodes(_schema()))[path]
    rules = [rule for rule in node.get(VALIDATIONS, []) if rule["rule"] == "self == oldSelf"]
    assert rules, path
    assert path.rsplit(".", 1)[-1] in rules[0]["message"]


@pytest.mark.parametrize("field", ["parameterServers", "trainer", "checkpoint"])
def test_optional_immutable_fields_cannot_be_added_or_removed(field: str) -> None:
    spec = dict(_nodes(_schema()))[".spec"]
    assert f"has(self.{field}) == has(oldSelf.{field})" in [rule["rule"] for rule in spec[VALIDATIONS]]


@pytest.mark.parametrize("role", [".spec.workers", ".spec.parameterServers"])
def test_a_roles_image_cannot_be_added_or_removed(role: str) -> None:
    """Without an image a role runs the default recorded in the status; naming one later would change it."""
    node = dict(_nodes(_schema()))[role]
    assert "has(self.image) == has(oldSelf.image)" in [rule["rule"] for rule in node[VALIDATIONS]]


def test_names_columns_and_subresources() -> None:
    manifest = crd.crd()
    names = manifest["spec"]["names"]
    version = manifest["spec"]["versions"][0]
    assert manifest["metadata"]["name"] == "trainingjobs.trainingjob.io"
    assert (names["kind"], names["plural"], names["shortNames"]) == ("TrainingJob", "trainingjobs", ["tj"])
    assert version["subresources"] == {"status": {}}
    columns = [(column["name"], column.get("priority", 0)) for column in version["additionalPrinterColumns"]]
    default = ["Phase", "Mode", "Workers", "Ready", "Attempt", "Step", "Progress", "Loss", "Age"]
    assert [name for name, priority in columns if priority == 0] == default
    assert [name for name, priority in columns if priority == 1] == ["ETA", "Goodput"]  # kubectl get -o wide


def test_quantities_are_int_or_string_with_the_model_pattern() -> None:
    limits = dict(_nodes(_schema()))[".spec.workers.resources.limits"]["additionalProperties"]
    assert limits["x-kubernetes-int-or-string"] is True
    assert limits["pattern"] == QUANTITY


def test_crd_yaml_has_no_aliases() -> None:
    assert "&id" not in crd.render()
