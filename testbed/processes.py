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


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
