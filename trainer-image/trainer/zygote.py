"""`python -m trainer --zygote <agent pid> <socket fd> [script args...]`: one process per pod that imports torch
once and forks every later warm spare (trainer.spare).

Why: a spare started as a new process imports torch and the trainer again, about 3 s of CPU, after every in-place
restart, beside the attempt that trains on the same cores. The zygote pays those imports once per pod; each spare
after that is a fork of it: copy-on-write, milliseconds, nothing imported again.

The agent (trainer.zygote_link) and the zygote talk over a Unix socket pair the agent made:
- The zygote warms up (trainer.spare.warm_up, in a thread at lowered priority; it forks from its main thread, at the
  pod's priority, once that thread is done), then writes b"ready\\n".
- The agent writes b"fork\\n" with one file descriptor attached: the read end of the new spare's order pipe.
- The zygote forks a middle process that forks the spare and exits at once: the spare is re-parented to the agent (a
  child subreaper), which waits for it like any child. The spare takes a session of its own (its attempt's process
  group) and says its pid. Once the middle process is reaped, the zygote closes a pipe the spare waits on (the spare
  goes on, as the agent's child: it dies with the agent and reads its order from its pipe, trainer.spare) and writes
  the pid to the agent, b"<pid>\\n".
- End of the socket: the zygote exits. It dies with the agent too.

Nothing forked may hold what a child cannot use: the zygote's warm-up runs no backward pass and no CUDA call (each
fork rehearses a backward pass itself before it waits for its order, trainer.spare), and a zygote that finds CUDA
initialised after its warm-up exits (spares are then new processes, as before).
"""

import logging
import os
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from trainer import spare
from trainer.contract import ExitCode
from trainer.failures import ConfigError
from trainer.signals import StopFlag
from trainer.zygote_link import FORK, LINE_BYTES, READY, ZYGOTE_FLAG

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Forked:
    """What a freshly forked spare runs with, once it has left the zygote's loop."""

    agent_pid: int
    orders: int  # the read end of its order pipe
    argv: tuple[str, ...]


def serve(argv: Sequence[str], run: Callable[[Sequence[str]], int]) -> int:
    """The zygote's life, and each spare's it forks (`run`: the launcher's, without the agent)."""
    outcome = _serve_forks(argv)
    if isinstance(outcome, int):
        return outcome
    spare.die_with_parent(outcome.agent_pid)
    stop = StopFlag().install()
    # What the zygote could not rehearse (a backward pass, milliseconds), this fork does before it waits, from the
    # thread that will train: the autograd engine's threads it starts keep the pod's priority.
    spare.warm_up(modules=(), lower_priority=False)
    with os.fdopen(outcome.orders, "rb") as orders:
        order = spare.read_order(orders)
    return spare.take_order(order, outcome.argv, run, stop)


def _arguments(argv: Sequence[str]) -> tuple[int, int, tuple[str, ...]]:
    if len(argv) < 2 or not argv[0].isdigit() or not argv[1].isdigit():
        raise ConfigError("arguments", ZYGOTE_FLAG, "must be followed by the agent's pid and the socket's descriptor")
    return int(argv[0]), int(argv[1]), tuple(argv[2:])


def _serve_forks(argv: Sequence[str]) -> int | Forked:
    """Warm up, then fork a spare per request until the agent closes the socket: an exit code in the zygote, the
    spare's Forked in each spare."""
    agent_pid, fd, script = _arguments(argv)
    spare.die_with_parent(agent_pid)
    with socket.socket(fileno=fd) as link:
        warming = threading.Thread(target=spare.warm_up, kwargs={"backward": False}, name="zygote-warm-up", daemon=True)
        warming.start()
        warming.join()  # the forks come from this thread, at the pod's priority
        if _cuda_initialised():
            log.error("CUDA was initialised during the zygote's warm-up: no fork could use it; exiting")
            return int(ExitCode.RETRYABLE)
        link.sendall(READY)
        while True:
            orders = receive_fork_request(link)
            if orders is None:
                return int(ExitCode.SUCCEEDED)
            pid = _fork(orders)
            if pid == 0:  # the spare: out of the loop, its copy of the socket closed on the way
                return Forked(agent_pid, orders, script)
            link.sendall(b"%d\n" % pid)


def _cuda_initialised() -> bool:
    import torch  # noqa: PLC0415

    return bool(torch.cuda.is_initialized())  # type: ignore[no-untyped-call]


def receive_fork_request(link: socket.socket) -> int | None:
    """The order pipe of the next fork request; None at the end of the socket or for anything else."""
    try:
        message, fds, _, _ = socket.recv_fds(link, LINE_BYTES, 1)
    except OSError:
        return None
    if message != FORK or len(fds) != 1:
        for fd in fds:
            os.close(fd)
        if message:
            log.error("the zygote got %r, not a fork request: exiting", message[:LINE_BYTES])
        return None
    os.set_inheritable(fds[0], False)  # the spare's own children never hold its order pipe
    return fds[0]


def _fork(orders: int) -> int:
    """Fork a spare through a middle process: its pid in the zygote (-1 when that failed), 0 in the spare (by then
    the agent's child)."""
    go_read, go_write = os.pipe()
    pid_read, pid_write = os.pipe()
    middle = os.fork()
    if middle == 0:
        os.close(go_write)
        os.close(pid_read)
        _become_spare_or_exit(go_read, pid_write)
        return 0
    os.close(go_read)
    os.close(pid_write)
    try:
        with os.fdopen(pid_read, "rb") as answer:
            told = answer.read(LINE_BYTES)
        os.waitpid(middle, 0)
    finally:
        os.close(go_write)  # the spare goes on
        os.close(orders)
    return int(told) if told.isdigit() else -1


def _become_spare_or_exit(go_read: int, pid_write: int) -> None:
    """In the middle process: fork the spare and exit. Returns only in the spare: the leader of a session of its own,
    its pid written, once the zygote has reaped the middle process (so the spare is the agent's child)."""
    try:
        pid = os.fork()
    except OSError:
        pid = -1
    if pid != 0:
        os._exit(0 if pid > 0 else 1)
    os.setsid()  # before the agent learns the pid: ending its process group must end it
    os.write(pid_write, b"%d" % os.getpid())
    os.close(pid_write)
    os.read(go_read, 1)  # end of the pipe: the zygote has reaped the middle process (or died)
    os.close(go_read)
