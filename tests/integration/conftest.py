"""Integration fixtures: the generated CRD installed and established, and a Harness per test (the real operator's
fixture is in tests/conftest.py, shared with the browser tier)."""

from collections.abc import Iterator

import pytest
from testbed.controlplane import ControlPlane
from testbed.crds import install_crd
from testbed.harness import Harness
from testbed.operator import OperatorProcess


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
