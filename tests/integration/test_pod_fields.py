"""The proof behind corpus_pod_fields: a real apiserver takes a bare Pod with each valid fragment and refuses one
with each invalid fragment, so the model and the CRD (test_crd.py runs the same cases) refuse exactly what a pod
would."""

import json
import subprocess
from typing import Any

import pytest
from kubernetes import client
from testbed.controlplane import ControlPlane
from tests.support.corpus_pod_fields import POD_CASES, POD_VALID, PodCase

from trainingjob.children.naming import Replica
from trainingjob.children.specs import pod_manifest
from trainingjob.model import TrainingJob

pytestmark = pytest.mark.envtest

KUBECTL = "/usr/bin/kubectl"


@pytest.fixture(scope="module")
def pods(envtest: ControlPlane) -> None:
    """Pods in the default namespace, whose default ServiceAccount (no controller makes it here) admission needs."""
    with envtest.api_client() as api:
        core = client.CoreV1Api(api)
        try:
            core.create_namespaced_service_account("default", {"metadata": {"name": "default"}})
        except client.ApiException as error:
            if error.status != 409:
                raise


def _pod_refusal(plane: ControlPlane, pod: dict[str, Any]) -> str | None:
    """None when the apiserver would create the pod (kubectl's server dry run, strict), else why not. kubectl
    sends the fragment as written (the Python client checks bodies itself and would refuse some first)."""
    result = subprocess.run(
        [KUBECTL, "--kubeconfig", str(plane.kubeconfig), "create", "--dry-run=server", "-n", "default", "-f", "-"],
        input=json.dumps(pod),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return None if result.returncode == 0 else result.stderr


@pytest.mark.parametrize("case", POD_CASES, ids=[case.id for case in POD_CASES])
def test_a_pod_judges_the_fragment_as_the_model_does(envtest: ControlPlane, pods: None, case: PodCase) -> None:
    refusal = _pod_refusal(envtest, case.pod())
    if case.field is None:
        assert refusal is None, refusal
    else:
        assert refusal is not None, "a pod takes the fragment the model refuses"


def _fragment_in(pod: dict[str, Any], case: PodCase) -> Any:
    """What the operator's pod holds where the case's fragment goes."""
    if case.place == "volume":
        return next(v for v in pod["spec"]["volumes"] if v["name"] == "data")
    if case.place == "affinity":
        return pod["spec"]["affinity"]
    return pod["spec"]["containers"][0]["resources"]


ON_PODS = [case for case in POD_VALID if case.place != "owners"]  # a job's owners are its own, not its pods'


@pytest.mark.parametrize("case", ON_PODS, ids=[case.id for case in ON_PODS])
def test_the_operators_pod_carries_a_valid_fragment_as_written(
    envtest: ControlPlane, pods: None, case: PodCase
) -> None:
    """The model passes on what it took unchanged (no field renamed or dropped), in a pod the apiserver takes."""
    pod = pod_manifest(TrainingJob.from_manifest(case.case.manifest), "0a1b2c3d", Replica("worker", 0), attempt=0)
    written = {"name": "data", **case.fragment} if case.place == "volume" else case.fragment
    assert _fragment_in(pod, case) == written
    refusal = _pod_refusal(envtest, pod)
    assert refusal is None, refusal


def test_owner_references_are_kept_as_written() -> None:
    owned = next(case for case in POD_VALID if case.place == "owners")
    job = TrainingJob.from_manifest(owned.case.manifest)
    assert job.to_manifest()["metadata"]["ownerReferences"] == owned.fragment
