"""Server processes for tests: start in their own process group, stop by process group id, free ports."""

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def interrupt_on_sigterm() -> None:
    """From now on SIGTERM ends this process as Ctrl-C does (KeyboardInterrupt), so the context managers and test
    fixtures on the way out stop the servers they started. A run killed with `kill`, `kill -- -PGID` (its xdist
    workers too) or `timeout` would otherwise leave every server running: each is in a process group of its own.
    Call it from the main thread."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)


class ProcessFailedError(RuntimeError):
    """A server process exited or did not become ready in time."""


# free_port's ports: below the kernel's ephemeral range (32768-60999 by default), which bind(("", 0)) and every
# outgoing connection take their local ports from, and below the trainer's fixed ports (29400-29501).
PORTS = range(20000, 29000)
PORT_CLAIM = "\0trainingjob-port-{}"
_claims: dict[int, socket.socket] = {}  # the ports this process handed out, each claimed while it lives
_next_port = [0]


def _ephemeral_range() -> range:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return range(int(low), int(high) + 1)
    except (OSError, ValueError):
        return range(32768, 61000)


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("0.0.0.0", port))  # taken on any address (a pod's 127.N.x.x too) counts as taken
        except OSError:
            return False
    return True


def free_port() -> int:
    """A TCP port that nothing listens on right now, and that nothing else is handed until a server binds it.

    The port is handed out here but bound later, often by another process (an etcd, an apiserver, a trainer): an
    ephemeral port (bind to port 0, then close) could meanwhile be taken by anything on the machine asking for one,
    or by any outgoing connection, and the server then failed with EADDRINUSE (or a readiness probe found another
    server there). So ports come from PORTS, outside the ephemeral range, each claimed by an abstract Unix socket
    (testbed/pod_range.py's way) for as long as this process lives: another test process using free_port skips it,
    and this process hands each out once (again only once PORTS is used up, and then only one not bound now)."""
    ephemeral = _ephemeral_range()
    candidates = [port for port in PORTS if port not in ephemeral] or list(PORTS)  # the claims still hold
    start = (_next_port[0] or os.getpid()) % len(candidates)
    for port in candidates[start:] + candidates[:start]:
        if port in _claims:
            continue
        claim = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            claim.bind(PORT_CLAIM.format(port))
        except OSError:  # another process handed it out
            claim.close()
            continue
        _claims[port] = claim
        if _bindable(port):
            _next_port[0] = candidates.index(port) + 1
            return port
    for port in _claims:  # every one handed out already: one nobody binds now, which this process still claims
        if _bindable(port):
            return port
    raise RuntimeError(f"no free port left in {PORTS.start}-{PORTS.stop - 1}")


def poll_until(check: Callable[[], T | None], *, timeout: float, interval: float = 0.1, what: str = "condition") -> T:
    """Call `check` until it returns something other than None (or False); fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            result = check()
            if result is not None and result is not False:
                return result
        except Exception as error:
            last_error = error
        if time.monotonic() > deadline:
            detail = f": last error {last_error!r}" if last_error else ""
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}{detail}")
        time.sleep(interval)


class Server:
    """One long-running process with its output in a log file, in a process group of its own."""

    def __init__(self, name: str, argv: Sequence[str], log_dir: Path, env: dict[str, str] | None = None):
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            list(argv),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )

    def log_tail(self, lines: int = 30) -> str:
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def check_alive(self) -> None:
        """Raise with the end of the log when the process has exited."""
        code = self.process.poll()
        if code is not None:
            raise ProcessFailedError(f"{self.name} exited with code {code}; its log ends:\n{self.log_tail()}")

    def wait_ready(self, is_ready: Callable[[], bool], timeout: float) -> None:
        def check() -> bool:
            self.check_alive()
            return is_ready()

        try:
            poll_until(check, timeout=timeout, what=f"{self.name} to become ready")
        except TimeoutError as error:
            raise ProcessFailedError(f"{error}; its log ends:\n{self.log_tail()}") from error

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the process group, then SIGKILL it if it is still there after `grace` seconds."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=grace)
        self._log.close()
