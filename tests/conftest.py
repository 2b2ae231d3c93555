"""Session fixtures for the two control-plane tiers and a fresh namespace per test."""

import re
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client
from tests.support.controlplane import ControlPlane, running


def _control_plane(cluster: bool) -> Iterator[ControlPlane]:
    with running(cluster=cluster, prefix="tj-cluster-" if cluster else "tj-envtest-") as plane:
        yield plane


@pytest.fixture(scope="session")
def envtest() -> Iterator[ControlPlane]:
    """etcd + kube-apiserver with RBAC, client-certificate users and ServiceAccount token signing."""
    yield from _control_plane(cluster=False)


@pytest.fixture(scope="session")
def cluster() -> Iterator[ControlPlane]:
    """The envtest tier plus controller-manager, scheduler and kwok with two 8-GPU nodes."""
    yield from _control_plane(cluster=True)


def _namespace(plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    stem = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"{stem}-{uuid.uuid4().hex[:6]}"
    with plane.api_client() as api:
        core = client.CoreV1Api(api)
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
        try:
            core.create_namespaced_service_account(
                name, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="default"))
            )
        except client.ApiException as error:
            if error.status != 409:  # the controller-manager made it first
                raise
        yield name
        core.delete_namespace(name)


@pytest.fixture
def envtest_ns(envtest: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace in the envtest tier, deleted after the test."""
    yield from _namespace(envtest, request)


@pytest.fixture
def cluster_ns(cluster: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace in the cluster tier, deleted after the test."""
    yield from _namespace(cluster, request)
