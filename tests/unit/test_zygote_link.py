"""The agent's hold on a spare the zygote forked (trainer.zygote_link.ForkedSpare): what it uses of a Popen, on real
child processes (started with posix_spawn, so no Popen reaps them)."""

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from testbed.processes import poll_until

from trainer.agent_procs import container_code, end_group
from trainer.zygote_link import ForkedSpare

pytestmark = pytest.mark.fast

SHELL = "/bin/sh"


@pytest.fixture
def spares() -> Iterator[list[ForkedSpare]]:
    started: list[ForkedSpare] = []
    yield started
    for spare in started:
        if spare.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(spare.pid, signal.SIGKILL)
            spare.wait()


def spawn(spares: list[ForkedSpare], script: str, *, own_group: bool = False) -> ForkedSpare:
    reader, writer = os.pipe()
    pid = os.posix_spawn(
        SHELL, [SHELL, "-c", script], os.environ, setsid=own_group, file_actions=[(os.POSIX_SPAWN_DUP2, reader, 0)]
    )
    os.close(reader)
    spare = ForkedSpare(pid, os.fdopen(writer, "wb"))
    spares.append(spare)
    return spare


@pytest.mark.parametrize(
    ("script", "code"),
    [("exit 0", 0), ("exit 3", 3), ("kill -9 $$", -signal.SIGKILL)],
    ids=["success", "exit-code", "killed"],
)
def test_wait_gives_the_code_as_popen_does(spares: list[ForkedSpare], script: str, code: int) -> None:
    spare = spawn(spares, script)
    assert spare.wait() == code
    assert spare.poll() == code and spare.returncode == code
    assert not Path(f"/proc/{spare.pid}").exists(), "not reaped"


def test_poll_is_none_while_it_runs_and_wait_times_out(spares: list[ForkedSpare]) -> None:
    spare = spawn(spares, "read line; exit 5")  # runs until its stdin says something
    assert spare.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        spare.wait(timeout=0.05)
    spare.stdin.write(b"go\n")
    spare.stdin.close()
    assert spare.wait(timeout=30) == 5


def test_one_thread_waits_while_another_polls(spares: list[ForkedSpare]) -> None:
    spare = spawn(spares, "read line; exit 7")
    waited: list[int] = []
    waiter = threading.Thread(target=lambda: waited.append(spare.wait()))
    waiter.start()
    poll_until(spare._reaping.locked, timeout=10, what="the waiter to hold the reaping lock")
    assert spare.poll() is None  # another thread waits: poll does not block, and says it still runs
    spare.stdin.write(b"go\n")
    spare.stdin.close()
    waiter.join(30)
    assert waited == [7] and spare.poll() == 7


def test_end_group_ends_a_forked_spare_in_a_group_of_its_own(spares: list[ForkedSpare]) -> None:
    spare = spawn(spares, "sleep 600 & wait", own_group=True)  # a child of its own in the group
    poll_until(lambda: len(_group(spare.pid)) == 2, timeout=10, what="the spare's own child")
    assert end_group(spare) == container_code(-signal.SIGKILL) == 137
    assert _group(spare.pid) == []


def test_a_reaped_spare_is_not_signalled_again(spares: list[ForkedSpare]) -> None:
    spare = spawn(spares, "exit 0")
    spare.wait()
    spare.send_signal(signal.SIGKILL)  # its pid may be another process's by now: nothing is sent
    assert spare.returncode == 0


def _group(pgid: int) -> list[int]:
    """The live processes of process group `pgid` (zombies excluded)."""
    members = []
    for stat in os.listdir("/proc"):
        if not stat.isdigit():
            continue
        try:
            fields = Path(f"/proc/{stat}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(stat))
    return members
