"""Node-tier fixtures: one real node for the session (testbed/node.py), the chart installed into it from
our images, a fresh namespace per test and a Harness over it. Every test file here is marked `node`."""

from collections.abc import Iterator

import pytest
from kubernetes import client
from testbed import node
from testbed.harness import Harness
from testbed.namespaces import fresh_namespace
from testbed.node import NodeTier
from testbed.node_cluster import OperatorPodLog, install_chart


@pytest.fixture(scope="session")
def node_tier(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeTier]:
    """The control plane and one real node, with the chart installed from our images."""
    with node.running() as tier:
        install_chart(tier, tmp_path_factory.mktemp("helm"))
        yield tier


@pytest.fixture
def node_ns(node_tier: NodeTier, request: pytest.FixtureRequest) -> Iterator[str]:
    yield from fresh_namespace(node_tier.plane, request.node.name)


@pytest.fixture
def nh(node_tier: NodeTier, node_ns: str) -> Iterator[Harness]:
    """A Harness over the test's namespace, with the in-cluster operator's log for failure messages."""
    with node_tier.api_client() as api:
        yield Harness(api, node_ns, OperatorPodLog(client.CoreV1Api(api)))
