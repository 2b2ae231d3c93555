"""The docs' cluster commands, block by block as written: installing the chart (`helm install`, or `helm template`
piped to kubectl), applying the examples, the dev cluster, the REST API run by hand. Each block gets a control
plane of its own with the CRDs installed (the docs' "your cluster"; its kubeconfig is the docs' `.dev/kubeconfig`
too), except `make dev-cluster`'s, which makes its own. Pods do not run here: the node tier runs the commands
that need them (tests/node/test_doc_commands.py)."""

import shutil
from pathlib import Path

import pytest
from tests.integration.conftest import install_crd
from tests.support import controlplane
from tests.support.doc_commands import Run, blocks, how
from tests.support.doc_runner import checkout_view, terminal

from trainingjob.generate import crd

pytestmark = pytest.mark.envtest
BLOCKS = blocks("integration")


def _own_cluster(block: str) -> bool:
    return any(isinstance(rule := how(command), Run) and rule.makes_its_own_cluster for command in BLOCKS[block])


@pytest.mark.parametrize("block", list(BLOCKS), ids=list(BLOCKS))
def test_a_block_of_cluster_commands_runs_as_written(block: str, tmp_path: Path) -> None:
    view = checkout_view(tmp_path / "checkout")
    if _own_cluster(block):
        with terminal(view) as shell:
            for command in BLOCKS[block]:
                shell.run(command)
        return
    with controlplane.running(cluster=False, prefix="tj-docs-") as plane:
        with plane.api_client() as api:
            for resource in crd.RESOURCES:
                install_crd(api, resource)
        kubeconfig = view / ".dev" / "kubeconfig"
        kubeconfig.parent.mkdir()
        shutil.copy(plane.kubeconfig, kubeconfig)
        with terminal(view, KUBECONFIG=str(kubeconfig)) as shell:
            for command in BLOCKS[block]:
                shell.run(command)
