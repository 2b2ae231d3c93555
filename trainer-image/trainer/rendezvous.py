"""Waiting for a peer's port to open (rank 0's store, a parameter server) with a deadline, never forever."""

import logging
import socket
import time
from collections.abc import Callable

from trainer.failures import RetryableError

log = logging.getLogger(__name__)


def wait_for_port(
    host: str,
    port: int,
    deadline_seconds: float,
    what: str,
    interval: float = 0.2,
    *,
    stopped: Callable[[], bool] = lambda: False,
) -> None:
    """Poll host:port until a TCP connect succeeds; DNS that does not resolve yet counts as not open. InterruptedError
    once `stopped()` says the process is told to stop (a SIGTERM: the peer may be gone for good, as in a suspend)."""
    deadline = time.monotonic() + deadline_seconds
    attempts = 0
    while True:
        attempts += 1
        try:
            with socket.create_connection((host, port), timeout=min(2.0, deadline_seconds)):
                if attempts > 1:
                    log.info("%s at %s:%d is reachable after %d attempts", what, host, port, attempts)
                return
        except OSError as error:
            if attempts == 1:
                log.info("waiting up to %gs for %s at %s:%d (%s)", deadline_seconds, what, host, port, error)
            if time.monotonic() >= deadline:
                raise RetryableError(
                    f"{what} at {host}:{port} not reachable within {deadline_seconds:g}s: {error}"
                ) from None
            if stopped():
                raise InterruptedError(f"stopped while waiting for {what} at {host}:{port}") from None
        time.sleep(interval)
