"""The agent's hold on a spare the zygote forked (trainer.zygote_link.ForkedSpare): what it uses of a Popen, on real
child processes (started with posix_spawn, so no Popen reaps them); and the agent's and the zygote's sides of their
socket (the forks themselves run in tests/trainer/test_in_place_agent.py)."""

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from testbed.processes import poll_until

from trainer import zygote_link
from trainer.agent_procs import container_code, end_group
from trainer.zygote import receive_fork_request
from trainer.zygote_link import FORK, READY, ForkedSpare, ZygoteLink

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


# The protocol, the agent's side: a socket pair whose far end the test plays as the zygote.


@pytest.fixture
def link_and_far_end(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ZygoteLink, socket.socket]]:
    monkeypatch.setattr(zygote_link, "FORK_SECONDS", 0.2)
    ours, theirs = socket.socketpair()
    idle = subprocess.Popen([SHELL, "-c", "read line"], stdin=subprocess.PIPE)  # stands in for the zygote's process
    yield ZygoteLink(idle, ours), theirs
    theirs.close()
    ours.close()
    idle.kill()
    idle.wait()


def test_ready_once_the_whole_line_came(link_and_far_end: tuple[ZygoteLink, socket.socket]) -> None:
    link, far = link_and_far_end
    assert not link.ready()
    far.sendall(b"rea")
    assert not link.ready() and not link.broken
    far.sendall(b"dy\n")
    assert link.ready() and link.ready() and not link.broken


@pytest.mark.parametrize(
    "zygote_says", [b"hello\n", b"", None], ids=["not-ready-but-something-else", "its-end", "nothing-by-the-deadline"]
)
def test_a_zygote_that_does_not_get_ready_breaks_the_link(
    link_and_far_end: tuple[ZygoteLink, socket.socket], zygote_says: bytes | None
) -> None:
    link, far = link_and_far_end
    if zygote_says is None:
        link.warm_up_deadline = time.monotonic()
    elif zygote_says:
        far.sendall(zygote_says)
    else:
        far.shutdown(socket.SHUT_WR)
    assert not link.ready() and link.broken


def test_a_fork_passes_the_order_pipe_and_takes_the_pid(link_and_far_end: tuple[ZygoteLink, socket.socket]) -> None:
    link, far = link_and_far_end
    far.sendall(READY)
    assert link.ready()
    far.sendall(b"4242\n")  # answered before it is asked: the link reads it only once it asked
    spare = link.fork()
    assert spare is not None and spare.pid == 4242 and not link.broken
    message, fds, _, _ = socket.recv_fds(far, 64, 1)
    assert message == FORK and len(fds) == 1
    spare.stdin.write(b"order\n")
    spare.stdin.close()
    with os.fdopen(fds[0], "rb") as orders:
        assert orders.read() == b"order\n"


@pytest.mark.parametrize("answer", [b"-1\n", b"x\n", b""], ids=["failed-fork", "garbage", "no-answer"])
def test_a_fork_without_a_pid_breaks_the_link(
    link_and_far_end: tuple[ZygoteLink, socket.socket], answer: bytes
) -> None:
    link, far = link_and_far_end
    far.sendall(READY + answer)
    assert link.ready()
    assert link.fork() is None and link.broken
    _, fds, _, _ = socket.recv_fds(far, 64, 1)
    with os.fdopen(fds[0], "rb") as orders:
        assert orders.read() == b"", "the agent kept the order pipe's write end"


def test_a_fork_from_a_gone_zygote_breaks_the_link(link_and_far_end: tuple[ZygoteLink, socket.socket]) -> None:
    link, far = link_and_far_end
    far.sendall(READY)
    assert link.ready()
    far.close()
    assert link.fork() is None and link.broken


# The protocol, the zygote's side.


@pytest.mark.parametrize(
    ("message", "with_fd", "takes_it"),
    [(FORK, True, True), (b"nope\n", True, False), (FORK, False, False)],
    ids=["fork-request", "other-message", "no-descriptor"],
)
def test_the_zygote_takes_only_a_fork_request_with_its_pipe(message: bytes, with_fd: bool, takes_it: bool) -> None:
    agent, zygote_end = socket.socketpair()
    reader, writer = os.pipe()
    with agent, zygote_end:
        socket.send_fds(agent, [message], [reader] if with_fd else [])
        received = receive_fork_request(zygote_end)
        agent.close()
        assert receive_fork_request(zygote_end) is None  # the agent's end
    os.close(reader)
    os.close(writer)
    if not takes_it:
        assert received is None
        return
    assert received is not None and not os.get_inheritable(received)
    os.close(received)
