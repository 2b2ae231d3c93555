"""`make dev-cluster` refuses to replace a dev cluster whose keeper runs, and replaces a stale one: the decision
(testbed.devcluster.running_keeper) against a live keeper-like process, a dead one and an unrelated one."""

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from testbed import devcluster
from testbed.processes import poll_until

pytestmark = pytest.mark.fast

# A process whose command line is a keeper's (`python -m testbed.devcluster keep --dir DIR`) but which only
# sleeps: `-c` ends the interpreter's options, the rest is its argv.
SLEEPER = "import time; time.sleep(60)"


@pytest.fixture
def keeper(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen([sys.executable, "-c", SLEEPER, *devcluster.KEEPER_ARGS, "--dir", str(tmp_path)])
    # Popen may return before /proc shows the new command line (empty, or still the parent's): wait for it.
    cmdline = Path(f"/proc/{process.pid}/cmdline")
    poll_until(lambda: SLEEPER.encode() in cmdline.read_bytes(), timeout=10, what="the keeper's command line")
    yield process
    process.kill()
    process.wait()


def record(folder: Path, pid: int) -> None:
    (folder / "keeper.pid").write_text(f"{pid}\n")


def test_a_live_keeper_is_running(tmp_path: Path, keeper: subprocess.Popen[bytes]) -> None:
    record(tmp_path, keeper.pid)
    assert devcluster.running_keeper(tmp_path) == keeper.pid


def test_a_dead_keeper_is_stale(tmp_path: Path, keeper: subprocess.Popen[bytes]) -> None:
    record(tmp_path, keeper.pid)
    keeper.kill()
    keeper.wait()
    assert devcluster.running_keeper(tmp_path) is None


def test_a_pid_reused_by_another_program_is_stale(tmp_path: Path) -> None:
    record(tmp_path, os.getpid())  # this pytest: alive, and no keeper
    assert devcluster.running_keeper(tmp_path) is None


@pytest.mark.parametrize("content", [None, "", "not a pid\n"], ids=["no-file", "empty", "garbage"])
def test_no_recorded_keeper_is_no_cluster(tmp_path: Path, content: str | None) -> None:
    if content is not None:
        (tmp_path / "keeper.pid").write_text(content)
    assert devcluster.running_keeper(tmp_path) is None


def test_up_refuses_while_a_keeper_runs_and_says_how_to_restart(
    tmp_path: Path, keeper: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_new_keeper(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"up started a process: {args}")

    monkeypatch.setattr(subprocess, "Popen", no_new_keeper)
    record(tmp_path, keeper.pid)
    (tmp_path / "ready").touch()
    with pytest.raises(SystemExit) as refused:
        devcluster.up(tmp_path)
    assert "already running" in str(refused.value.code)
    assert "make dev-cluster-down && make dev-cluster" in str(refused.value.code)
    assert keeper.poll() is None and (tmp_path / "keeper.pid").exists()  # left as it was
