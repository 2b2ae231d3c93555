"""The generated CRD in a real kube-apiserver: it judges the corpus as pydantic does, takes the examples."""

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from pydantic import ValidationError
from testbed.controlplane import ControlPlane
from testbed.examples import JOB_EXAMPLES
from testbed.processes import poll_until
from tests.support.corpus_admission import ADMISSION_CASES
from tests.support.corpus_trainingjob import (
    CASES,
    Case,
    checkpoint,
    job,
    names_field,
    ps_job,
    pydantic_error_paths,
    with_value,
)

from trainingjob.model import GROUP, PLURAL, VERSION, TrainingJob, changed_immutable_fields

pytestmark = pytest.mark.envtest

ROOT = Path(__file__).resolve().parents[2]
KUBECTL = "/usr/bin/kubectl"


@pytest.fixture
def jobs(trainingjob_crd: ControlPlane) -> Iterator[client.CustomObjectsApi]:
    with trainingjob_crd.api_client() as api:
        yield client.CustomObjectsApi(api)


def _create(jobs: client.CustomObjectsApi, namespace: str, manifest: dict[str, Any], **options: Any) -> Any:
    return jobs.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, manifest, field_validation="Strict", **options
    )


def _apiserver_verdict(jobs: client.CustomObjectsApi, manifest: dict[str, Any]) -> str | None:
    """None when the apiserver accepts the manifest (dry run), else its error message."""
    try:
        _create(jobs, "default", manifest, dry_run="All")
    except client.ApiException as error:
        if error.status not in (400, 422):
            raise
        return str(json.loads(error.body).get("message", error.body))
    return None


def _pydantic_paths(manifest: dict[str, Any]) -> list[str] | None:
    """None when pydantic accepts the manifest, else the paths of its errors."""
    try:
        TrainingJob.from_manifest(manifest)
    except ValidationError as error:
        return pydantic_error_paths(error)
    return None


@pytest.mark.parametrize("case", CASES + ADMISSION_CASES, ids=[case.id for case in CASES + ADMISSION_CASES])
def test_apiserver_and_pydantic_agree(jobs: client.CustomObjectsApi, case: Case) -> None:
    message = _apiserver_verdict(jobs, case.manifest)
    paths = _pydantic_paths(case.manifest)
    assert (message is None) == (paths is None), f"apiserver: {message!r}, pydantic: {paths!r}"
    if case.field is None:
        assert message is None
        return
    assert message is not None, "the apiserver accepted an invalid manifest"
    assert case.field in message
    assert paths is not None
    assert any(names_field(path, case.field) for path in paths), paths


def _old_and_new(path: str, value: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    old = ps_job(checkpoint=checkpoint())
    return old, with_value(old, path, value)


IMMUTABLE_CHANGES = [  # (the field changed, its new value, the field the error names)
    ("spec.mode", "DDP", "spec.mode"),
    ("spec.workers.replicas", 8, "spec.workers.replicas"),
    ("spec.workers.image", "example.com/other:1", "spec.workers.image"),
    ("spec.workers.command", ["python", "x.py"], "spec.workers.command"),
    ("spec.parameterServers.replicas", 3, "spec.parameterServers.replicas"),
    ("spec.trainer.workload", "synthetic", "spec.trainer"),
    ("spec.checkpoint.path", "/elsewhere", "spec.checkpoint.path"),
    ("spec.checkpoint.volume", {"emptyDir": {}}, "spec.checkpoint.volume"),
]
MUTABLE_CHANGES = [
    ("spec.runPolicy.backoffLimit", 10),
    ("spec.runPolicy.suspend", True),
    ("spec.checkpoint.keep", 7),
    ("spec.workers.resources", {"limits": {"cpu": "2"}}),
]


def _replace(jobs: client.CustomObjectsApi, namespace: str, old: dict[str, Any], new: dict[str, Any]) -> str | None:
    stored = _create(jobs, namespace, old)
    new = {**new, "metadata": {**new["metadata"], "resourceVersion": stored["metadata"]["resourceVersion"]}}
    try:
        jobs.replace_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, old["metadata"]["name"], new)
    except client.ApiException as error:
        if error.status != 422:
            raise
        return str(json.loads(error.body)["message"])
    return None


@pytest.mark.parametrize(("path", "value", "field"), IMMUTABLE_CHANGES, ids=[c[0] for c in IMMUTABLE_CHANGES])
def test_changing_an_immutable_field_is_refused(
    jobs: client.CustomObjectsApi, envtest_ns: str, path: str, value: Any, field: str
) -> None:
    old, new = _old_and_new(path, value)
    if path == "spec.mode":
        new["spec"].pop("parameterServers")
    if path == "spec.workers.image":  # a job that named its image (one that did not cannot add one: below)
        old["spec"]["workers"]["image"] = "example.com/first:1"
    if path == "spec.workers.command":  # a user command instead of the built-in trainer
        for manifest in (old, new):
            manifest["spec"].pop("trainer")
            manifest["spec"]["parameterServers"]["command"] = ["python", "ps.py"]
        old["spec"]["workers"]["command"] = ["python", "w.py"]
    message = _replace(jobs, envtest_ns, old, new)
    assert message is not None
    assert f"{field}: Invalid value" in message
    assert "immutable" in message
    assert field in changed_immutable_fields(TrainingJob.model_validate(old), TrainingJob.model_validate(new))


@pytest.mark.parametrize(("path", "value"), MUTABLE_CHANGES, ids=[p for p, _ in MUTABLE_CHANGES])
def test_changing_a_mutable_field_is_accepted(
    jobs: client.CustomObjectsApi, envtest_ns: str, path: str, value: Any
) -> None:
    old, new = _old_and_new(path, value)
    assert _replace(jobs, envtest_ns, old, new) is None
    assert changed_immutable_fields(TrainingJob.model_validate(old), TrainingJob.model_validate(new)) == []


def test_apiserver_defaults_match_pydantic_defaults(jobs: client.CustomObjectsApi, envtest_ns: str) -> None:
    minimal = job(workers={}, checkpoint={"volume": {"emptyDir": {}}, "everySteps": 10})
    stored = _create(jobs, envtest_ns, minimal)
    assert stored["spec"] == TrainingJob.model_validate(minimal).to_manifest()["spec"]


def test_status_subresource_takes_a_valid_status_only(jobs: client.CustomObjectsApi, envtest_ns: str) -> None:
    _create(jobs, envtest_ns, job())
    status = {"phase": "Running", "attempt": 1, "workers": {"active": 2, "ready": 2}}
    body = {"status": TrainingJob.model_validate({**job(), "status": status}).to_manifest()["status"]}
    jobs.patch_namespaced_custom_object_status(GROUP, VERSION, envtest_ns, PLURAL, "corpus", body)
    bad = {"status": {**body["status"], "phase": "Done"}}
    with pytest.raises(client.ApiException) as caught:
        jobs.patch_namespaced_custom_object_status(GROUP, VERSION, envtest_ns, PLURAL, "corpus", bad)
    assert "status.phase" in json.loads(caught.value.body)["message"]


@pytest.mark.parametrize("example", JOB_EXAMPLES, ids=[path.name for path in JOB_EXAMPLES])
def test_example_is_created_as_written(jobs: client.CustomObjectsApi, envtest_ns: str, example: Path) -> None:
    manifest = yaml.safe_load(example.read_text())
    stored = _create(jobs, envtest_ns, manifest)
    assert TrainingJob.model_validate(stored).spec == TrainingJob.model_validate(manifest).spec


def _explain(kubeconfig: Path, field: str) -> str | None:
    result = subprocess.run(
        [KUBECTL, "--kubeconfig", str(kubeconfig), "explain", field],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return result.stdout if result.returncode == 0 and "everySteps" in result.stdout else None


def test_kubectl_explain_shows_the_descriptions(trainingjob_crd: ControlPlane) -> None:
    text = poll_until(
        lambda: _explain(trainingjob_crd.kubeconfig, "trainingjob.spec.checkpoint"),
        timeout=60,
        interval=1,
        what="kubectl explain to know trainingjob.spec.checkpoint",
    )
    words = " ".join(text.split())
    assert "every restart resumes from the newest complete checkpoint" in words
    assert "keep <integer> How many complete checkpoints to keep" in words
    assert "volume <Object> -required- The volume checkpoints are written to" in words


@pytest.mark.parametrize(
    ("old_image", "new_image"),
    [pytest.param(None, "example.com/mine:1", id="added"), pytest.param("example.com/mine:1", None, id="removed")],
)
def test_naming_an_image_later_or_dropping_it_is_refused(
    jobs: client.CustomObjectsApi, envtest_ns: str, old_image: str | None, new_image: str | None
) -> None:
    """A role without an image runs the default the job started with (status.defaultImage): it stays so."""
    old, new = job(), job()
    for manifest, image in ((old, old_image), (new, new_image)):
        if image is not None:
            manifest["spec"]["workers"]["image"] = image
    message = _replace(jobs, envtest_ns, old, new)
    assert message is not None
    assert "spec.workers.image: Forbidden: image cannot be added or removed" in message
    assert changed_immutable_fields(TrainingJob.model_validate(old), TrainingJob.model_validate(new)) == [
        "spec.workers.image"
    ]


def test_removing_the_checkpoint_is_refused(jobs: client.CustomObjectsApi, envtest_ns: str) -> None:
    old = job(checkpoint=checkpoint())
    new = {**old, "spec": {key: value for key, value in old["spec"].items() if key != "checkpoint"}}
    message = _replace(jobs, envtest_ns, old, new)
    assert message is not None
    assert "spec.checkpoint: Forbidden: checkpoint cannot be added or removed" in message
    assert changed_immutable_fields(TrainingJob.model_validate(old), TrainingJob.model_validate(new)) == [
        "spec.checkpoint"
    ]
