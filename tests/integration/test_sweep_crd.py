"""The generated TrainingSweep CRD in a real kube-apiserver: its CEL rules compile and refuse a bad search space
naming the field, as the model does; the search space cannot change once the sweep exists."""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from testbed.controlplane import ControlPlane
from testbed.crds import install_crd
from testbed.examples import SWEEP_EXAMPLES
from testbed.namespaces import create_namespace
from tests.support.builders import SWEEP_PARAMETERS, sweep_manifest

from trainingjob.generate import crd
from trainingjob.model import GROUP, VERSION
from trainingjob.model.sweep import SWEEP_PLURAL, TrainingSweep

pytestmark = pytest.mark.envtest
NAMESPACE = "sweeps"
LR = SWEEP_PARAMETERS[0]


@pytest.fixture(scope="module")
def sweeps(envtest: ControlPlane) -> Iterator[client.CustomObjectsApi]:
    with envtest.api_client() as api:
        install_crd(api, crd.SWEEP)
        try:
            create_namespace(client.CoreV1Api(api), NAMESPACE)
        except client.ApiException as error:
            if error.status != 409:
                raise
        yield client.CustomObjectsApi(api)


def _create(sweeps: client.CustomObjectsApi, manifest: dict[str, Any]) -> dict[str, Any]:
    created: dict[str, Any] = sweeps.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, SWEEP_PLURAL, manifest)
    return created


def _refusal(sweeps: client.CustomObjectsApi, manifest: dict[str, Any]) -> str:
    with pytest.raises(client.ApiException) as refused:
        _create(sweeps, manifest)
    assert refused.value.status == 422
    return str(json.loads(refused.value.body)["message"])


def test_a_valid_sweep_is_stored_with_its_defaults(sweeps: client.CustomObjectsApi) -> None:
    stored = _create(sweeps, sweep_manifest("valid"))
    assert stored["spec"]["search"] == {"algorithm": "TPE", "seed": 0, "startupTrials": 5}
    assert stored["spec"]["maxTrials"] == 10 and stored["spec"]["parallelism"] == 2
    TrainingSweep.from_manifest(stored)  # what the apiserver stores, the model takes


@pytest.mark.parametrize(
    ("parameter", "field", "words"),
    [
        pytest.param({**LR, "min": 0.5, "max": 0.1}, "spec.parameters[0].max", "greater than min", id="max-below-min"),
        pytest.param({**LR, "min": 0.0}, "spec.parameters[0].min", "needs min above 0", id="log-from-zero"),
        pytest.param({**LR, "step": 0.1}, "spec.parameters[0].step", "cannot be combined with log", id="log-step"),
        pytest.param(
            {**LR, "type": "Int", "log": False, "min": 1.5},
            "spec.parameters[0].min",
            "whole numbers",
            id="int-fraction",
        ),
        pytest.param(
            {**LR, "type": "Categorical"}, "spec.parameters[0].type", "needs min and max", id="categorical-range"
        ),
        pytest.param(
            {**LR, "path": "metadata.name"}, "spec.parameters[0].path", "should match", id="path-outside-spec"
        ),
    ],
)
def test_a_bad_parameter_is_refused_naming_its_field(
    sweeps: client.CustomObjectsApi, parameter: dict[str, Any], field: str, words: str
) -> None:
    message = _refusal(sweeps, sweep_manifest("bad", parameters=[parameter]))
    assert field in message and words in message, message


def test_a_grid_without_a_step_on_a_float_is_refused(sweeps: client.CustomObjectsApi) -> None:
    message = _refusal(sweeps, sweep_manifest("grid", search={"algorithm": "Grid"}))
    assert "spec.parameters" in message and "Grid search needs a step" in message


@pytest.mark.parametrize("field", ["parameters", "objective", "search", "template"])
def test_the_search_cannot_change_once_the_sweep_exists(sweeps: client.CustomObjectsApi, field: str) -> None:
    name = f"fixed-{field}"
    stored = _create(sweeps, sweep_manifest(name))
    changed = {
        "parameters": [{**LR, "max": 0.5}],
        "objective": {"metric": "loss", "goal": "Minimize"},
        "search": {"algorithm": "Random"},
        "template": {
            **stored["spec"]["template"],
            "spec": {**stored["spec"]["template"]["spec"], "mode": "DDP", "workers": {"replicas": 3}},
        },
    }[field]
    stored["spec"][field] = changed
    with pytest.raises(client.ApiException) as refused:
        sweeps.replace_namespaced_custom_object(GROUP, VERSION, NAMESPACE, SWEEP_PLURAL, name, stored)
    assert refused.value.status == 422 and f"{field} is immutable" in json.loads(refused.value.body)["message"]


def test_max_trials_and_parallelism_can_change(sweeps: client.CustomObjectsApi) -> None:
    stored = _create(sweeps, sweep_manifest("grow"))
    stored["spec"].update(maxTrials=20, parallelism=4, suspend=True)
    replaced = sweeps.replace_namespaced_custom_object(GROUP, VERSION, NAMESPACE, SWEEP_PLURAL, "grow", stored)
    assert replaced["spec"]["maxTrials"] == 20 and replaced["spec"]["suspend"] is True


@pytest.mark.parametrize("example", SWEEP_EXAMPLES, ids=[path.name for path in SWEEP_EXAMPLES])
def test_example_is_created_as_written(sweeps: client.CustomObjectsApi, example: Path) -> None:
    manifest = yaml.safe_load(example.read_text())
    stored = _create(sweeps, manifest)
    assert TrainingSweep.from_manifest(stored).spec == TrainingSweep.from_manifest(manifest).spec


def test_a_template_with_a_ttl_is_refused_naming_the_field(sweeps: client.CustomObjectsApi) -> None:
    manifest = sweep_manifest("ttl")
    manifest["spec"]["template"]["spec"]["runPolicy"] = {"ttlSecondsAfterFinished": 60}
    message = _refusal(sweeps, manifest)
    assert "spec.template.spec.runPolicy.ttlSecondsAfterFinished" in message and "before the sweep" in message, message
