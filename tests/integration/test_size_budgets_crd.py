"""The size budgets in a real kube-apiserver: the CRDs' CEL rule on a role's text compiles within the cost limits,
takes the largest jobs and refuses one character more naming the role, as the model does; what CEL cannot measure
(the whole spec as JSON) the apiserver takes and the model refuses."""

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from testbed.controlplane import ControlPlane
from testbed.crds import install_crd
from testbed.large_jobs import WHERE, largest_job, many_small_parts, with_role_items, with_role_text
from tests.support.builders import sweep_manifest

from trainingjob.generate import crd
from trainingjob.model import GROUP, PLURAL, VERSION, TrainingJob
from trainingjob.model.budget import ROLE_ITEMS_MAX, ROLE_TEXT_MAX
from trainingjob.model.sweep import SWEEP_PLURAL

pytestmark = pytest.mark.envtest
ROLES = ("workers", "parameterServers")
TEXT_CASES = [pytest.param(role, where, id=f"{role}-{where}") for role in ROLES for where in WHERE]


@pytest.fixture(scope="module")
def objects(envtest: ControlPlane) -> Iterator[client.CustomObjectsApi]:
    with envtest.api_client() as api:
        install_crd(api)
        install_crd(api, crd.SWEEP)
        yield client.CustomObjectsApi(api)


def _verdict(objects: client.CustomObjectsApi, manifest: dict[str, Any], plural: str = PLURAL) -> str | None:
    """None when the apiserver takes the manifest (a strict dry run), else its message."""
    try:
        objects.create_namespaced_custom_object(
            GROUP, VERSION, "default", plural, manifest, dry_run="All", field_validation="Strict"
        )
    except client.ApiException as error:
        if error.status != 422:
            raise
        return str(json.loads(error.body)["message"])
    return None


@pytest.mark.parametrize("build", [largest_job, many_small_parts], ids=["largest-text", "many-small-parts"])
def test_the_largest_jobs_are_accepted(objects: client.CustomObjectsApi, build: Any) -> None:
    assert _verdict(objects, build()) is None


@pytest.mark.parametrize(("role", "where"), TEXT_CASES)
def test_a_role_text_at_its_budget_is_accepted(objects: client.CustomObjectsApi, role: str, where: str) -> None:
    assert _verdict(objects, with_role_text(role, where, ROLE_TEXT_MAX)) is None


@pytest.mark.parametrize(("role", "where"), TEXT_CASES)
def test_a_role_text_one_character_over_is_refused_naming_the_role(
    objects: client.CustomObjectsApi, role: str, where: str
) -> None:
    message = _verdict(objects, with_role_text(role, where, ROLE_TEXT_MAX + 1))
    assert message is not None
    assert f"spec.{role}: Invalid value" in message
    assert f"more than {ROLE_TEXT_MAX} characters" in message


@pytest.mark.parametrize("role", ROLES)
def test_a_role_at_its_item_budget_is_accepted_and_one_more_refused_naming_it(
    objects: client.CustomObjectsApi, role: str
) -> None:
    assert _verdict(objects, with_role_items(role, ROLE_ITEMS_MAX)) is None
    message = _verdict(objects, with_role_items(role, ROLE_ITEMS_MAX + 1))
    assert message is not None and f"spec.{role}: Invalid value" in message
    assert f"more than {ROLE_ITEMS_MAX} command and args entries" in message


def test_a_sweep_template_over_a_role_text_budget_is_refused_naming_it(objects: client.CustomObjectsApi) -> None:
    manifest = sweep_manifest(parameters=[{"name": "n", "path": "workers.replicas", "type": "Int", "min": 1, "max": 4}])
    manifest["spec"]["template"]["spec"] = with_role_text("workers", "args", ROLE_TEXT_MAX + 1)["spec"]
    message = _verdict(objects, manifest, SWEEP_PLURAL)
    assert message is not None and "spec.template.spec.workers: Invalid value" in message


def test_a_spec_over_its_byte_budget_passes_the_apiserver_and_the_model_refuses_it(
    objects: client.CustomObjectsApi,
) -> None:
    """CEL cannot serialize: the apiserver stores it, the operator fails it (InvalidSpec), every other entry point
    refuses it. If this starts failing, the apiserver learnt to measure it: say so in SECURITY.md."""
    manifest = largest_job(extra=1)
    assert _verdict(objects, manifest) is None
    with pytest.raises(ValueError, match=r"spec\.workers\.env"):
        TrainingJob.from_manifest(manifest)
