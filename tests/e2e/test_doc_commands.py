"""The docs' commands that need no cluster (`make demo`, `bin/tjctl run examples/...`), each run once as written
from the repository's root (tests/support/doc_commands.py says which, tests/support/doc_runner.py how)."""

from pathlib import Path

import pytest
from tests.support.doc_commands import DocCommand, distinct
from tests.support.doc_runner import checkout_view, terminal

pytestmark = pytest.mark.e2e

COMMANDS = distinct("e2e")


@pytest.mark.parametrize("command", COMMANDS, ids=[command.text for command in COMMANDS])
def test_a_local_command_of_the_docs_runs_as_written(command: DocCommand, tmp_path: Path) -> None:
    with terminal(checkout_view(tmp_path / "checkout")) as shell:
        shell.run(command)
