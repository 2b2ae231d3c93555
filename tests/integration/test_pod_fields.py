"""The proof behind corpus_pod_fields: a real apiserver takes a bare Pod with each valid fragment and refuses one
with each invalid fragment, so the model and the CRD (test_crd.py runs the same cases) refuse exactly what a pod
would."""

import json
import subprocess

import pytest
from kubernetes import client
from testbed.controlplane import ControlPlane
from tests.support.corpus_pod_fields import POD_CASES, PodCase

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


def _pod_refusal(plane: ControlPlane, case: PodCase) -> str | None:
    """None when the apiserver would create the pod (kubectl's server dry run, strict), else why not. kubectl
    sends the fragment as written (the Python client checks bodies itself and would refuse some first)."""
    result = subprocess.run(
        [KUBECTL, "--kubeconfig", str(plane.kubeconfig), "create", "--dry-run=server", "-n", "default", "-f", "-"],
        input=json.dumps(case.pod()),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return None if result.returncode == 0 else result.stderr


@pytest.mark.parametrize("case", POD_CASES, ids=[case.id for case in POD_CASES])
def test_a_pod_judges_the_fragment_as_the_model_does(envtest: ControlPlane, pods: None, case: PodCase) -> None:
    refusal = _pod_refusal(envtest, case)
    if case.field is None:
        assert refusal is None, refusal
    else:
        assert refusal is not None, "a pod takes the fragment the model refuses"
