"""The newcomer's path as written, on a real node with the chart installed as the README installs it (as
`make demo-cluster` does): the README's lines for the demo cluster, every command of the chart's notes as
`helm status` prints them (a first job that runs to Succeeded on a provisioned claim, the REST API through a
port-forward with a token that may create jobs), the dashboard doc's, and the README's tour of tjctl."""

import re
import shutil
from pathlib import Path

import httpx
import pytest
from kubernetes import client
from testbed.node import NodeTier
from tests.support.doc_commands import NOTES, TEMPLATE_VALUE, DocCommand, blocks, commands, how, notes_lines
from tests.support.doc_runner import Terminal, checkout_view, dev_kubeconfig, terminal

from trainingjob.model import GROUP, PLURAL, VERSION

pytestmark = pytest.mark.node

NODE = blocks("node")


def _block(source: str, showing: str) -> str:
    found = [key for key, block in NODE.items() if key.startswith(source) and any(showing in c.text for c in block)]
    assert len(found) == 1, f"one block of {source} showing {showing!r} expected, found {found}"
    return found[0]


DEMO, TOUR = _block("README.md", "helm status"), _block("README.md", "bin/tjctl submit")
DASHBOARD = _block("docs/dashboard.md", "port-forward")


def test_every_node_block_is_run_here() -> None:
    assert set(NODE) == {DEMO, TOUR, DASHBOARD, f"{NOTES}:0"}, "a new block for the node tier: run it here"


def test_the_newcomers_path_on_the_demo_cluster(node_tier: NodeTier, tmp_path: Path) -> None:
    view = checkout_view(tmp_path / "checkout")
    demo = view / ".demo-cluster"  # as `make demo-cluster` leaves it: the kubeconfig, kubectl and helm
    demo.mkdir()
    shutil.copy(node_tier.plane.kubeconfig, demo / "kubeconfig")
    node_tier.plane.link_binaries(demo / "bin")
    try:
        with terminal(view) as shell:
            status = ""
            for command in NODE[DEMO]:
                output = shell.run(command)
                status = output if "helm status" in command.text else status
            _run_the_notes(shell, status.partition("NOTES:\n")[2])
            shell.stop_serving()
            for command in NODE[DASHBOARD]:
                shell.run(command)
            ui = httpx.get(f"https://127.0.0.1:{shell.port}/ui/", verify=False, timeout=10)  # the browser's warning
            assert ui.status_code == 200 and "<html" in ui.text.lower(), ui.text[:500]
    finally:
        _remove_what_the_notes_made(node_tier)


def _run_the_notes(shell: Terminal, notes: str) -> None:
    """Every command of the rendered notes, in order; then each command of the template (but the variants the
    table allows) must be one of them."""
    rendered = [DocCommand(NOTES, line, 0, text) for line, text in notes_lines(notes)]
    for command in rendered:
        shell.run(command)
    template = [c for c in commands() if c.source == NOTES and not isinstance(how(c), str)]
    for command in template:
        pattern = ".*?".join(re.escape(part) for part in command.text.split(TEMPLATE_VALUE))
        assert any(re.fullmatch(pattern, c.text) for c in rendered), f"{command} is not in the notes:\n{notes}"


def _remove_what_the_notes_made(tier: NodeTier) -> None:
    """The notes work in namespace default: its jobs, claims, RBAC and tj-user go (the default account stays)."""
    with tier.api_client() as api:
        client.CustomObjectsApi(api).delete_collection_namespaced_custom_object(GROUP, VERSION, "default", PLURAL)
        core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
        core.delete_collection_namespaced_persistent_volume_claim("default")
        rbac.delete_collection_namespaced_role_binding("default")
        rbac.delete_collection_namespaced_role("default")
        for account in core.list_namespaced_service_account("default").items:
            if account.metadata.name != "default":
                core.delete_namespaced_service_account(account.metadata.name, "default")


def test_the_readme_tour_of_tjctl(node_tier: NodeTier, node_ns: str, tmp_path: Path) -> None:
    """On "your cluster" (`.dev/kubeconfig`, here the node tier's, its namespace the test's): submit, suspend and
    resume, watch to the end, wait, logs, timeline, a sweep."""
    view = checkout_view(tmp_path / "checkout")
    dev_kubeconfig(view, node_tier.plane.kubeconfig, node_ns)
    with terminal(view) as shell:
        outputs = {command.text: shell.run(command) for command in NODE[TOUR]}
    assert "Succeeded" in outputs["bin/tjctl watch digits-ddp"], outputs["bin/tjctl watch digits-ddp"]
