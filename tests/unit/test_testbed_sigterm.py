"""A test run sent SIGTERM stops the servers it started (testbed.processes.interrupt_on_sigterm, installed by
tests/conftest.py in every pytest process): each server is in a process group of its own, so a run that died at once
would leave them running."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from testbed.processes import poll_until

pytestmark = pytest.mark.fast
REPO = Path(__file__).resolve().parents[2]
SCRIPT = """
import signal, sys
from pathlib import Path
from testbed.processes import Server, interrupt_on_sigterm
if sys.argv[2] == "handled":
    interrupt_on_sigterm()
server = Server("sleeper", ["sleep", "600"], Path(sys.argv[1]))
try:
    print(server.process.pid, flush=True)
    signal.pause()
finally:
    server.stop()
"""


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize(("mode", "left_running"), [("handled", False), ("default", True)], ids=["handled", "default"])
def test_sigterm_stops_the_servers_a_run_started(tmp_path: Path, mode: str, left_running: bool) -> None:
    runner = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(tmp_path), mode], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    assert runner.stdout is not None
    server = int(runner.stdout.readline())
    try:
        runner.send_signal(signal.SIGTERM)
        runner.wait(timeout=60)
        if not left_running:
            poll_until(lambda: not _group_alive(server) or None, timeout=30, what="the server's group to end")
        assert _group_alive(server) == left_running
    finally:
        runner.kill()
        if _group_alive(server):
            os.killpg(server, signal.SIGKILL)
