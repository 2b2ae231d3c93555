"""Session fixtures for the two control-plane tiers, a fresh namespace per test, and the real operator against the
cluster tier (one per test module)."""

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from testbed.controlplane import ControlPlane, running
from testbed.crds import install_crd
from testbed.helm import Helm
from testbed.namespaces import fresh_namespace
from testbed.operator import OperatorProcess, operator_running
from testbed.processes import interrupt_on_sigterm
from xdist.scheduler import LoadScopeScheduling

from trainingjob.generate import crd


def pytest_configure(config: pytest.Config) -> None:
    """A run (or an xdist worker) sent SIGTERM tears its fixtures down, stopping the servers they started."""
    interrupt_on_sigterm()


# The longest test modules, run first: the workers take whole modules in the order collected, and one of these
# begun last keeps a worker busy alone for its whole length (the model-based test: about 10 minutes in make test).
LONGEST_FIRST = ("tests/unit/test_model_based.py", "tests/integration/test_chaos.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """GPU tests run only when asked for (`pytest -m gpu`, on a machine with CUDA); elsewhere they are not
    collected at all, rather than skipped. The longest modules go first."""
    items.sort(key=lambda item: item.nodeid.split("::", 1)[0] not in LONGEST_FIRST)  # stable: modules stay whole
    if "gpu" in (config.getoption("markexpr") or ""):
        return
    kept = [item for item in items if item.get_closest_marker("gpu") is None]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept


class TierScheduling(LoadScopeScheduling):
    """How `make test`'s two workers (pytest-xdist) share the tests: a test module stays on one worker (its
    module-scoped fixtures are set up once), and so does the whole node tier (one runs per machine)."""

    def _split_scope(self, nodeid: str) -> str:
        return "node" if nodeid.startswith("tests/node/") else nodeid.split("::", 1)[0]

    def _assign_work_unit(self, node: Any) -> None:
        """xdist orders the modules by their number of tests (the node tier first); the longest ones, of one test
        each, would come last: they go first."""
        for scope in reversed(LONGEST_FIRST):
            if scope in self.workqueue:
                self.workqueue.move_to_end(scope, last=False)
        super()._assign_work_unit(node)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> TierScheduling:
    return TierScheduling(config, log)


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


@pytest.fixture
def envtest_ns(envtest: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace in the envtest tier, deleted after the test."""
    yield from fresh_namespace(envtest, request.node.name)


@pytest.fixture
def cluster_ns(cluster: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace in the cluster tier, deleted after the test."""
    yield from fresh_namespace(cluster, request.node.name)


@pytest.fixture(scope="module")
def operator(cluster: ControlPlane) -> Iterator[OperatorProcess]:
    """The operator (`python -m trainingjob`) against the cluster tier, for one test module."""
    with cluster.api_client() as api:
        for resource in crd.RESOURCES:
            install_crd(api, resource)
    with operator_running(cluster.kubeconfig) as process:
        yield process


@pytest.fixture(scope="module")
def helm() -> Iterator[Helm]:
    """The control plane's helm (TJ_CONTROLPLANE_BIN), with its own home for one test module."""
    with tempfile.TemporaryDirectory(prefix="tj-helm-") as home:
        yield Helm(Path(home))
