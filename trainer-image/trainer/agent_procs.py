"""The in-place agent's processes: warm spares, one attempt's child, and process groups that end entirely.

Spares come from the pod's zygote (trainer.zygote: it imports torch once and forks each spare) once it has warmed up;
the first attempt's child, and every spare if the zygote fails or the agent cannot be a subreaper, are new processes
(`python -m trainer --spare`) that import for themselves.

Every child runs in a process group of its own (start_new_session): the attempt's child and whatever it starts (its
local ranks, their data-loader workers) share it, so killing the group kills the attempt. The agent marks itself a
child subreaper, so the group's orphans become its own children (as they would under PID 1 in a container) and
are reaped here: `end_group` returns only once nothing of the group is left, so its ports (the rendezvous store on
MASTER_PORT, the progress endpoint) are free for the next attempt. Children are started from the agent's main
thread only: their parent-death signal (trainer.spare) follows the thread that started them.
"""

import contextlib
import ctypes
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import IO, TypeAlias

from trainer import contract as c
from trainer.zygote_link import ForkedSpare, ZygoteLink

log = logging.getLogger(__name__)

SPARE_FLAG = "--spare"
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
GROUP_EXIT_SECONDS = 10.0


def prctl(option: int, value: int) -> bool:
    """Linux prctl(2); False where it is not available (then the agent works, with weaker guarantees)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, value, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


Child: TypeAlias = subprocess.Popen[bytes] | ForkedSpare


def become_subreaper() -> bool:
    """Orphaned descendants (an attempt's local ranks when their launcher died, a spare the zygote forked) become
    this process's children. False where that is not possible."""
    if prctl(PR_SET_CHILD_SUBREAPER, 1):
        return True
    log.warning("cannot become a child subreaper: an attempt's orphans are reaped by init instead")
    return False


def container_code(returncode: int) -> int:
    """A Popen return code as a container reports it: a death by signal N is 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def _reap_group(pgid: int, deadline: float) -> bool:
    """Reap the group's members that are (now) our children, until none is left or the deadline passes."""
    while True:
        try:
            pid, _ = os.waitpid(-pgid, os.WNOHANG)
        except ChildProcessError:
            pid = -1  # none of our children is left in the group
        if pid > 0:
            continue
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


def end_group(process: Child, grace: float = 0.0) -> int:
    """End a child and its whole process group: SIGTERM to the child first when `grace` > 0 (it forwards it to its
    local ranks, as a container runtime signals PID 1 alone), SIGKILL to the group at the grace's end. Returns the
    child's code (container_code)."""
    if grace > 0 and process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    code = container_code(process.wait())
    if not _reap_group(process.pid, time.monotonic() + GROUP_EXIT_SECONDS):
        log.error("process group %d still has members %gs after SIGKILL", process.pid, GROUP_EXIT_SECONDS)
    return code


def order_line(attempt: int, overrides: Mapping[str, str]) -> bytes:
    """What a spare reads on its stdin to become attempt `attempt`'s trainer: one JSON line."""
    return json.dumps({"attempt": attempt, "env": {**overrides, c.ATTEMPT: str(attempt)}}).encode() + b"\n"


class Spares:
    """Keeps one warm spare and turns it into an attempt's child on order. Spares are forked by the pod's zygote
    (started with the first spare) when `fork` is on, else started as `python -m trainer --spare <agent pid> [script
    args...]`."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], *, warm: bool, fork: bool) -> None:
        self.argv = list(argv)
        self.env = {name: value for name, value in env.items() if name != c.IN_PLACE}
        self.warm, self.fork = warm, fork
        self.spare: Child | None = None
        self.zygote: ZygoteLink | None = None

    def _spawn(self) -> subprocess.Popen[bytes]:
        command = [sys.executable, "-m", "trainer", SPARE_FLAG, str(os.getpid()), *self.argv]
        return subprocess.Popen(command, env=self.env, stdin=subprocess.PIPE, start_new_session=True)

    def _forked(self) -> Child | None:
        """A spare from the zygote (started now if there is none); None while it warms up. A zygote that fails is
        ended, and spares are new processes from then on."""
        if self.zygote is None:
            self.zygote = ZygoteLink.start(self.argv, self.env)
            log.info("zygote started (pid %d): it imports once and forks the spares", self.zygote.process.pid)
            return None
        if self.zygote.ready():
            spare = self.zygote.fork()
            if spare is not None:
                return spare
        if not self.zygote.broken and self.zygote.process.poll() is None:
            return None
        log.warning("the zygote (pid %d) failed: spares are new processes from now on", self.zygote.process.pid)
        self._end_zygote()
        self.fork = False
        return self._spawn()

    def keep_warm(self) -> None:
        """Have a spare if warm spares are on and none is alive (except while the zygote warms up)."""
        if not self.warm or (self.spare is not None and self.spare.poll() is None):
            return
        if self.spare is not None:
            log.warning("the spare (pid %d) exited with %d: starting another", self.spare.pid, self.spare.returncode)
            end_group(self.spare)
        self.spare = self._forked() if self.fork else self._spawn()
        if self.spare is not None:
            how = "forked by the zygote" if isinstance(self.spare, ForkedSpare) else "started"
            log.info("warm spare %s (pid %d)", how, self.spare.pid)

    def launch(self, attempt: int, overrides: Mapping[str, str] | None = None) -> Child:
        """Attempt `attempt`'s child: the warm spare given its order, or a fresh (cold) one if there is none."""
        line = order_line(attempt, overrides or {})
        spare, self.spare = self.spare, None
        if spare is None and self.fork and self.zygote is not None and self.zygote.ready():
            spare = self.zygote.fork()  # the zygote was ready before the main loop saw it: no need to start cold
        if spare is not None and spare.poll() is None and _hand(spare.stdin, line):
            log.info("attempt %d: handed to the warm spare (pid %d)", attempt, spare.pid)
            return spare
        if spare is not None:
            end_group(spare)
        child = self._spawn()
        if not _hand(child.stdin, line):
            log.error("attempt %d: a fresh child (pid %d) did not take its order", attempt, child.pid)
        log.info("attempt %d: started cold (pid %d)", attempt, child.pid)
        return child

    def close(self) -> None:
        """End the spare and the zygote, if there are."""
        spare, self.spare = self.spare, None
        if spare is not None:
            end_group(spare)
        self._end_zygote()

    def _end_zygote(self) -> None:
        zygote, self.zygote = self.zygote, None
        if zygote is not None:
            zygote.close()
            end_group(zygote.process)


def _hand(pipe: IO[bytes] | None, line: bytes) -> bool:
    """Write an order into a spare's stdin and close it (the spare reads one line, to the end of the pipe)."""
    if pipe is None:
        return False
    try:
        pipe.write(line)
        pipe.close()
    except OSError:
        return False
    return True
