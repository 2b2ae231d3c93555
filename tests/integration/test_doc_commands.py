"""The docs' cluster commands, block by block as written: installing the chart (`helm install`, or `helm template`
piped to kubectl), applying the examples, the dev cluster, the REST API run by hand. A block gets a control plane
of its own with the CRDs installed (the docs' "your cluster"; its kubeconfig is their `.dev/kubeconfig` too), or,
when all it does stays in one namespace, a namespace of its own on the module's plane; `make dev-cluster`'s makes
its own cluster. Pods do not run here: the node tier runs the commands that need them
(tests/node/test_doc_commands.py)."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from testbed import controlplane
from testbed.controlplane import ControlPlane
from testbed.crds import install_crd
from testbed.namespaces import fresh_namespace
from tests.support.doc_commands import Run, blocks, how
from tests.support.doc_runner import checkout_view, dev_kubeconfig, terminal

from trainingjob.generate import crd

pytestmark = pytest.mark.envtest
BLOCKS = blocks("integration")


def _rules(block: str) -> list[Run]:
    return [rule for command in BLOCKS[block] if isinstance(rule := how(command), Run)]


@pytest.fixture(scope="module")
def shared() -> Iterator[ControlPlane]:
    """The plane of the blocks that stay in a namespace."""
    with _plane() as plane:
        yield plane


@pytest.mark.parametrize("block", list(BLOCKS), ids=list(BLOCKS))
def test_a_block_of_cluster_commands_runs_as_written(
    block: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    view = checkout_view(tmp_path / "checkout")
    rules = _rules(block)
    if any(rule.makes_its_own_cluster for rule in rules):
        _run(block, view, None)
    elif all(rule.in_a_namespace for rule in rules):
        plane: ControlPlane = request.getfixturevalue("shared")
        for namespace in fresh_namespace(plane, request.node.name):
            _run(block, view, dev_kubeconfig(view, plane.kubeconfig, namespace))
    else:
        with _plane() as plane:
            _run(block, view, dev_kubeconfig(view, plane.kubeconfig, "default"))


def _run(block: str, view: Path, kubeconfig: Path | None) -> None:
    values = {"KUBECONFIG": str(kubeconfig)} if kubeconfig else {}
    with terminal(view, **values) as shell:
        for command in BLOCKS[block]:
            shell.run(command)


@contextmanager
def _plane() -> Iterator[ControlPlane]:
    with controlplane.running(cluster=False, prefix="tj-docs-") as plane:
        with plane.api_client() as api:
            for resource in crd.RESOURCES:
                install_crd(api, resource)
        yield plane
