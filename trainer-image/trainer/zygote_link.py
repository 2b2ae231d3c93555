"""The agent's side of its pod's zygote (trainer.zygote): start it, see it ready, ask it for a spare, and hold that
spare as it holds a Popen.

The agent never blocks on the zygote but to fork: `ready` reads without waiting, and `fork` waits at most
FORK_SECONDS for the pid (a fork takes milliseconds). Anything else from the zygote, its end, a late answer, or no
"ready" within WARM_UP_SECONDS makes the link `broken`, and the agent starts its spares as new processes from then on
(trainer.agent_procs.Spares).
"""

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO

from trainer.contract import ExitCode

ZYGOTE_FLAG = "--zygote"
READY = b"ready\n"
FORK = b"fork\n"
LINE_BYTES = 64
WARM_UP_SECONDS = 600.0  # a zygote not ready by then is given up (its imports hang, or it starves)
FORK_SECONDS = 5.0
WAIT_POLL_SECONDS = 0.01


class ForkedSpare:
    """A spare the zygote forked, the agent's child once its pid is known: the part of a Popen the agent uses (pid,
    stdin, returncode, poll, wait, send_signal), with Popen's guarantee that one thread reaps it."""

    def __init__(self, pid: int, stdin: IO[bytes]) -> None:
        self.pid, self.stdin = pid, stdin
        self.returncode: int | None = None
        self._reaping = threading.Lock()

    def poll(self) -> int | None:
        """Its code once it has exited (a death by signal N is -N, as Popen says); None while it runs, or while
        another thread waits for it."""
        if self.returncode is None and self._reaping.acquire(blocking=False):
            try:
                self._reap(os.WNOHANG)
            finally:
                self._reaping.release()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Its code, once it has exited; subprocess.TimeoutExpired after `timeout` seconds."""
        if timeout is not None:
            deadline = time.monotonic() + timeout
            while self.poll() is None:
                if time.monotonic() >= deadline:
                    raise subprocess.TimeoutExpired(str(self.pid), timeout)
                time.sleep(WAIT_POLL_SECONDS)
        with self._reaping:
            self._reap(0)
        assert self.returncode is not None
        return self.returncode

    def _reap(self, options: int) -> None:
        if self.returncode is not None:
            return
        try:
            pid, status = os.waitpid(self.pid, options)
        except ChildProcessError:  # reaped elsewhere: gone, its code unknown
            self.returncode = int(ExitCode.RETRYABLE)
            return
        if pid == self.pid:
            self.returncode = os.waitstatus_to_exitcode(status)

    def send_signal(self, signum: signal.Signals) -> None:
        """Signal it, unless it was reaped (its pid may be another process's by then)."""
        if self.returncode is None:
            os.kill(self.pid, signum)


class ZygoteLink:
    """The agent's end of the socket to its pod's zygote (`process`)."""

    def __init__(self, process: "subprocess.Popen[bytes]", link: socket.socket) -> None:
        self.process, self.link, self.pending = process, link, b""
        self.warm_up_deadline = time.monotonic() + WARM_UP_SECONDS
        self._ready = self.broken = False

    @classmethod
    def start(cls, argv: Sequence[str], env: Mapping[str, str]) -> "ZygoteLink":
        """Start `python -m trainer --zygote <agent pid> <fd> [script args...]`."""
        ours, theirs = socket.socketpair()
        command = [sys.executable, "-m", "trainer", ZYGOTE_FLAG, str(os.getpid()), str(theirs.fileno()), *argv]
        try:
            process = subprocess.Popen(
                command, env=dict(env), stdin=subprocess.DEVNULL, pass_fds=[theirs.fileno()], start_new_session=True
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        return cls(process, ours)

    def ready(self) -> bool:
        """Whether the zygote has warmed up and takes fork requests (never waits)."""
        if not self._ready and not self.broken:
            line = self._line(0.0)
            self._ready = line == READY
            late = line is None and time.monotonic() >= self.warm_up_deadline
            self.broken = self.broken or late or (line is not None and not self._ready)
        return self._ready

    def fork(self) -> ForkedSpare | None:
        """A new spare, waiting for its order on a pipe of its own; None (and the link broken) if the zygote did
        not answer with a pid within FORK_SECONDS."""
        orders, writer = os.pipe()
        try:
            socket.send_fds(self.link, [FORK], [orders])
            answer = self._line(FORK_SECONDS)
        except OSError:
            answer = None
        finally:
            os.close(orders)
        pid = int(answer) if answer is not None and answer.strip().isdigit() else 0
        if pid <= 0:
            self.broken = True
            os.close(writer)
            return None
        return ForkedSpare(pid, os.fdopen(writer, "wb"))

    def _line(self, timeout: float) -> bytes | None:
        """The zygote's next line; None when none came within `timeout` (0: no wait) or the link broke."""
        self.link.settimeout(timeout)
        while b"\n" not in self.pending:
            try:
                chunk = self.link.recv(LINE_BYTES)
            except (BlockingIOError, TimeoutError):
                return None
            except OSError:
                chunk = b""
            if not chunk or len(self.pending) > LINE_BYTES:
                self.broken = True
                return None
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return line + b"\n"

    def close(self) -> None:
        """Close the socket: the zygote exits (the caller ends its process group)."""
        with contextlib.suppress(OSError):
            self.link.close()
