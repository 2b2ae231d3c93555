"""TrainingSweeps through the SDK's two transports (the Kubernetes API, and the REST API) against a real apiserver:
create (checked by the model first, naming the field), read, list, the best trial, delete; a caller without rights
on sweeps is refused; the REST API's own /best answer and its 422 for a sweep the model refuses."""

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import yaml
from kubernetes import client
from testbed.crds import install_crd
from testbed.processes import poll_until
from tests.support.builders import sweep_manifest
from tests.support.rest_api import ALL_VERBS, TIMEOUT, Clients, World, grant, jobs_path, manifest

from trainingjob.generate import crd
from trainingjob.model import GROUP, VERSION
from trainingjob.model.sweep import SWEEP_PLURAL, TrainingSweep
from trainingjob_sdk import Client, Forbidden, Invalid, NotFound

pytestmark = pytest.mark.envtest
BAD_LR = [{"name": "lr", "path": "trainer.learningRate", "type": "Float", "min": 0.5, "max": 50.0}]
BEST = {"number": 1, "jobName": "lr-1", "parameters": {"lr": 0.01, "batch": 32}, "objective": 0.97}


@pytest.fixture(scope="module")
def sweep_crd(admin: client.ApiClient) -> None:
    install_crd(admin, crd.SWEEP)


@pytest.fixture
def sweeper(sweep_crd: None, clients: Clients, world: World) -> Iterator[Client]:
    """The home namespace's writer, also allowed every verb on its sweeps."""
    rules = [client.V1PolicyRule(api_groups=[GROUP], resources=[SWEEP_PLURAL], verbs=ALL_VERBS)]
    grant(clients.admin, "sweeper", (world.home, "writer"), rules, namespace=world.home)
    with clients.of(world.home, "writer") as made:
        yield made


def _set_status(admin: client.ApiClient, namespace: str, name: str, status: dict[str, Any]) -> None:
    client.CustomObjectsApi(admin).patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, SWEEP_PLURAL, name, {"status": status}
    )


def test_a_sweep_is_created_read_listed_ranked_and_deleted(
    sweeper: Client, world: World, admin: client.ApiClient
) -> None:
    created = sweeper.sweeps.create(sweep_manifest("lr", maxTrials=4))
    assert isinstance(created, TrainingSweep) and created.metadata.namespace == world.home
    assert sweeper.sweeps.get("lr").spec.max_trials == 4
    assert [s.metadata.name for s in sweeper.sweeps.list()] == ["lr"]
    assert sweeper.sweeps.best("lr") is None  # no trial has succeeded
    _set_status(admin, world.home, "lr", {"phase": "Running", "bestTrial": BEST})
    best = sweeper.sweeps.best("lr")
    assert best is not None and (best.job_name, best.objective, best.parameters) == ("lr-1", 0.97, BEST["parameters"])
    sweeper.sweeps.delete("lr")
    with pytest.raises(NotFound, match='trainingsweep "lr"'):
        sweeper.sweeps.get("lr")


def test_a_sweep_the_model_refuses_is_named_before_it_is_sent(sweeper: Client) -> None:
    with pytest.raises(Invalid) as refused:
        sweeper.sweeps.create(sweep_manifest("bad", parameters=BAD_LR))
    assert [f.field for f in refused.value.fields] == ["spec.parameters[0]"]
    assert "less than or equal to 10" in refused.value.fields[0].message
    with pytest.raises(NotFound):  # nothing was created
        sweeper.sweeps.get("bad")


def test_a_caller_without_rights_on_sweeps_is_refused(sweep_crd: None, clients: Clients, world: World) -> None:
    with clients.of(world.other, "reader") as reader, pytest.raises(Forbidden):  # it may read jobs, not sweeps
        reader.sweeps.list(world.other)


def test_the_rest_api_answers_best_and_refuses_an_invalid_sweep_naming_the_field(
    sweep_crd: None, world: World, admin: client.ApiClient
) -> None:
    rules = [client.V1PolicyRule(api_groups=[GROUP], resources=[SWEEP_PLURAL], verbs=ALL_VERBS)]
    grant(admin, "sweeper", (world.home, "writer"), rules, namespace=world.home)
    path = f"/api/v1/namespaces/{world.home}/{SWEEP_PLURAL}"
    refused = world.writer.post(path, json=sweep_manifest("bad", parameters=BAD_LR))
    assert refused.status_code == 422, refused.text
    assert [f["field"] for f in refused.json()["fields"]] == ["spec.parameters[0]"]
    yaml_body = httpx.Headers({"Content-Type": "application/yaml"})
    created = world.writer.post(path, content=yaml.safe_dump(sweep_manifest("lr")).encode(), headers=yaml_body)
    assert created.status_code == 201, created.text
    assert created.json()["metadata"]["uid"] and "managedFields" not in created.json()["metadata"]
    none_yet = world.writer.get(f"{path}/lr/best")
    assert (none_yet.status_code, none_yet.json()["reason"]) == (404, "NoBestTrial")
    _set_status(admin, world.home, "lr", {"phase": "Running", "bestTrial": BEST})
    assert world.writer.get(f"{path}/lr/best").json() == BEST
    assert world.writer.get(path).json()["items"][0]["status"]["bestTrial"] == BEST
    assert world.writer.delete(f"{path}/lr").json() == {"namespace": world.home, "name": "lr", "status": "Deleting"}


def test_every_sweep_the_caller_may_list_is_listed_across_namespaces(
    sweep_crd: None, world: World, admin: client.ApiClient
) -> None:
    rules = [client.V1PolicyRule(api_groups=[GROUP], resources=[SWEEP_PLURAL], verbs=ALL_VERBS)]
    grant(admin, "sweeper", (world.home, "writer"), rules, namespace=world.home)
    client.CustomObjectsApi(admin).create_namespaced_custom_object(
        GROUP, VERSION, world.home, SWEEP_PLURAL, sweep_manifest("lr")
    )
    assert world.writer.post(jobs_path(world.home), json=manifest("lr-0")).status_code == 201  # its first trial

    def listed() -> list[str] | None:
        items = world.writer.get(f"/api/v1/{SWEEP_PLURAL}").json()["items"]
        names = [f"{s['metadata']['namespace']}/{s['metadata']['name']}" for s in items]
        return names or None  # the API lists the namespaces its job cache holds jobs in: the trial's, once seen

    assert poll_until(listed, timeout=TIMEOUT, what="the sweep listed") == [f"{world.home}/lr"]
    assert world.reader.get(f"/api/v1/{SWEEP_PLURAL}").json()["items"] == []  # it may read jobs, not sweeps
