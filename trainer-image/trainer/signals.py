"""SIGTERM (preemption, drain, suspend) as a flag the training loops check between steps."""

import logging
import signal
import threading
from types import FrameType

log = logging.getLogger(__name__)


class StopFlag:
    """Set by SIGTERM or SIGINT; training loops finish the step, checkpoint and exit PREEMPTED."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def install(self) -> "StopFlag":
        """Route SIGTERM and SIGINT to this flag (main thread only)."""
        signal.signal(signal.SIGTERM, self._handle)
        signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        log.warning("received %s: stopping after this step", signal.Signals(signum).name)
        self._event.set()

    def set(self) -> None:
        """Ask the loop to stop."""
        self._event.set()

    def is_set(self) -> bool:
        """True once a stop was requested."""
        return self._event.is_set()
