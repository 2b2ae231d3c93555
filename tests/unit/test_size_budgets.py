"""The size budgets in the model (every entry point but kubectl judges a manifest with it): the largest job is
accepted, one character or byte over is refused naming the field; a sweep's template is held to the same; a stored
job over the budget fails saying which part is largest."""

from typing import Any

import pytest
from pydantic import ValidationError
from testbed.large_jobs import (
    WHERE,
    largest_job,
    many_small_parts,
    smallest_job,
    text_env,
    with_role_items,
    with_role_text,
)
from tests.support.builders import T0, job_manifest, seen, sweep_manifest

from trainingjob.model import TrainingJob
from trainingjob.model.budget import (
    ROLE_ITEMS_MAX,
    ROLE_TEXT_MAX,
    SPEC_MAX_BYTES,
    json_size,
    role_items,
    role_text,
)
from trainingjob.model.sweep import TrainingSweep
from trainingjob.plan.invalid import plan_invalid

pytestmark = pytest.mark.fast
ROLES = ("workers", "parameterServers")
TEXT_CASES = [pytest.param(role, where, id=f"{role}-{where}") for role in ROLES for where in WHERE]


def _refusal(manifest: dict[str, Any], model: type[TrainingJob | TrainingSweep] = TrainingJob) -> dict[str, Any]:
    with pytest.raises(ValidationError) as refused:
        model.from_manifest(manifest)
    (error,) = refused.value.errors()
    return {"field": ".".join(map(str, error["loc"])), "message": error["msg"]}


def _spec_bytes(manifest: dict[str, Any]) -> int:
    spec = TrainingJob.from_manifest(manifest).spec
    return json_size(spec.model_dump(mode="json", by_alias=True, exclude_none=True))


@pytest.mark.parametrize("build", [largest_job, many_small_parts], ids=["largest-text", "many-small-parts"])
def test_the_largest_jobs_are_exactly_at_the_budget_and_accepted(build: Any) -> None:
    manifest = build()
    assert _spec_bytes(manifest) == SPEC_MAX_BYTES


def test_the_largest_job_fills_a_role_text_to_its_budget() -> None:
    assert role_text(largest_job()["spec"]["workers"]) == ROLE_TEXT_MAX


def test_one_byte_over_the_spec_budget_is_refused_naming_the_largest_part() -> None:
    refused = _refusal(largest_job(extra=1))
    assert refused["field"] == "spec.workers.env"
    assert f"{SPEC_MAX_BYTES + 1} bytes" in refused["message"]
    assert f"more than the {SPEC_MAX_BYTES}" in refused["message"]


def test_bytes_not_characters_count_toward_the_spec_budget() -> None:
    manifest = largest_job()
    servers = manifest["spec"]["parameterServers"]["env"][0]
    servers["value"] = servers["value"][:-1] + "é"  # the same characters, one byte more in UTF-8
    assert _refusal(manifest)["field"] == "spec.workers.env"


@pytest.mark.parametrize(("role", "where"), TEXT_CASES)
def test_a_role_text_at_its_budget_is_accepted(role: str, where: str) -> None:
    manifest = with_role_text(role, where, ROLE_TEXT_MAX)
    assert role_text(manifest["spec"][role]) == ROLE_TEXT_MAX
    TrainingJob.from_manifest(manifest)


@pytest.mark.parametrize(("role", "where"), TEXT_CASES)
def test_a_role_text_one_character_over_is_refused_naming_the_role(role: str, where: str) -> None:
    refused = _refusal(with_role_text(role, where, ROLE_TEXT_MAX + 1))
    assert refused["field"] == f"spec.{role}"
    assert f"more than {ROLE_TEXT_MAX} characters" in refused["message"]


@pytest.mark.parametrize("role", ROLES)
def test_a_role_at_its_item_budget_is_accepted_and_one_more_refused_naming_it(role: str) -> None:
    manifest = with_role_items(role, ROLE_ITEMS_MAX)
    assert role_items(manifest["spec"][role]) == ROLE_ITEMS_MAX
    TrainingJob.from_manifest(manifest)
    refused = _refusal(with_role_items(role, ROLE_ITEMS_MAX + 1))
    assert refused["field"] == f"spec.{role}"
    assert f"more than {ROLE_ITEMS_MAX} command and args entries" in refused["message"]


def test_every_container_of_a_role_counts_toward_its_text() -> None:
    half = ROLE_TEXT_MAX // 2
    sidecar = {"name": "proxy", "image": "envoy", "env": text_env(half + 1, "S")}
    init = {"name": "fetch", "image": "busybox", "env": text_env(half - 1, "I")}
    workers = {"replicas": 1, "sidecars": [sidecar], "initContainers": [init], "env": [{"name": "X", "value": ""}]}
    assert _refusal(job_manifest(workers=workers))["field"] == "spec.workers"


@pytest.mark.parametrize(
    ("template_spec", "field"),
    [
        pytest.param(with_role_text("workers", "env", ROLE_TEXT_MAX + 1)["spec"], "workers", id="role-text"),
        pytest.param(largest_job(extra=1)["spec"], "workers.env", id="spec-size"),
    ],
)
def test_a_sweep_template_is_held_to_the_job_budgets(template_spec: dict[str, Any], field: str) -> None:
    manifest = sweep_manifest(parameters=[{"name": "seed", "path": "trainer.seed", "type": "Int", "min": 0, "max": 9}])
    manifest["spec"]["template"]["spec"] = template_spec
    if "trainer" not in template_spec:  # a job running its own command: the parameter fills an environment variable
        manifest["spec"]["parameters"][0]["path"] = "workers.replicas"
    assert _refusal(manifest, TrainingSweep)["field"] == f"spec.template.spec.{field}"


def test_a_stored_job_over_the_budget_fails_naming_its_largest_part() -> None:
    manifest = largest_job(extra=1)
    manifest["metadata"].update(namespace="ns", uid="uid", generation=1)
    with pytest.raises(ValidationError) as refused:
        TrainingJob.from_manifest(manifest)
    result = plan_invalid(manifest, refused.value, seen([]), T0)
    assert result.status is not None and result.status.phase == "Failed"
    assert "spec.workers.env" in result.events[0].message and "131073 bytes" in result.events[0].message


def test_the_smallest_job_is_far_inside_the_budget() -> None:
    assert _spec_bytes(smallest_job()) < SPEC_MAX_BYTES // 100
