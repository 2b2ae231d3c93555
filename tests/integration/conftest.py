"""Integration fixtures: the generated CRD installed and established, and a Harness per test (the real operator's
fixture is in tests/conftest.py, shared with the browser tier)."""

from collections.abc import Iterator

import pytest
from kubernetes import client
from tests.support.controlplane import ControlPlane
from tests.support.harness import Harness
from tests.support.namespaces import create_namespace
from tests.support.operator import OperatorProcess
from tests.support.processes import poll_until

from trainingjob.generate import crd

_ESTABLISH_TIMEOUT = 60.0


def _is_established(extensions: client.ApiextensionsV1Api, name: str) -> bool:
    found = extensions.read_custom_resource_definition(name)
    conditions = found.status.conditions or []
    return any(c.type == "Established" and c.status == "True" for c in conditions)


def install_crd(api: client.ApiClient, resource: crd.Resource = crd.JOB) -> None:
    """Create or replace a generated CRD (TrainingJob's unless told) and wait until the apiserver serves it."""
    extensions = client.ApiextensionsV1Api(api)
    manifest, name = crd.crd(resource), resource.crd_name
    try:
        extensions.create_custom_resource_definition(manifest)
    except client.ApiException as error:
        if error.status != 409:
            raise
        current = extensions.read_custom_resource_definition(name)
        manifest["metadata"]["resourceVersion"] = current.metadata.resource_version
        extensions.replace_custom_resource_definition(name, manifest)
    poll_until(lambda: _is_established(extensions, name), timeout=_ESTABLISH_TIMEOUT, what=f"{name} Established")


def prepare_bare_plane(api: client.ApiClient, namespace: str) -> None:
    """A plane of a test's own without a controller-manager: the CRD, a namespace and the ServiceAccount that
    the controller-manager would have made in it."""
    install_crd(api)
    create_namespace(client.CoreV1Api(api), namespace)


@pytest.fixture(scope="session")
def trainingjob_crd(envtest: ControlPlane) -> ControlPlane:
    """The envtest control plane with the TrainingJob CRD installed and established."""
    with envtest.api_client() as api:
        install_crd(api)
    return envtest


@pytest.fixture
def h(cluster: ControlPlane, cluster_ns: str, operator: OperatorProcess) -> Iterator[Harness]:
    with cluster.api_client() as api:
        yield Harness(api, cluster_ns, operator)
