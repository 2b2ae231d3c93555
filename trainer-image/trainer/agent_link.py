"""A follower agent's line to the coordinator (rank 0's agent): a long poll that keeps its view of the gang, and a
queue that delivers its signed reports in order. Neither ever starts or stops a process: they update what the
agent's main loop reads and wake it."""

import http.client
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from trainer.agent_http import LONG_POLL_SECONDS, request_json
from trainer.agent_state import FAILED, STARTING

log = logging.getLogger(__name__)

RETRY_SECONDS = (0.2, 0.5, 1.0, 2.0)


class CoordinatorLink:
    """The view (attempt, state) of the gang as the coordinator last told it, and this pod's reports to it."""

    def __init__(self, address: tuple[str, int], key: bytes, rank: int, attempt: int, wake: Callable[[], None]) -> None:
        self.address, self.key, self.rank = address, key, rank
        self._wake = wake
        self._lock = threading.Lock()
        self._view = (attempt, STARTING)
        self._reports: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._closed = threading.Event()
        self._threads = [
            threading.Thread(target=self._poll, name="agent-poll", daemon=True),
            threading.Thread(target=self._deliver, name="agent-report", daemon=True),
        ]

    def start(self) -> "CoordinatorLink":
        """Start polling and delivering."""
        for thread in self._threads:
            thread.start()
        return self

    def view(self) -> tuple[int, str]:
        """(attempt, state) of the gang, as last heard."""
        with self._lock:
            return self._view

    def report(self, attempt: int, event: str, exit_code: int = 0) -> None:
        """Queue a report to the coordinator (delivered in order, each retried until it is through)."""
        self._reports.put({"rank": self.rank, "attempt": attempt, "event": event, "exitCode": exit_code})

    def flush(self, timeout: float) -> bool:
        """Wait until every queued report was delivered or given up on; False at the timeout."""
        deadline = time.monotonic() + timeout
        while self._reports.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.02)
        return not self._reports.unfinished_tasks

    def close(self) -> None:
        """Stop polling and delivering (what is still queued is dropped)."""
        self._closed.set()
        self._reports.put(None)

    def _learn(self, answer: dict[str, Any]) -> None:
        attempt, state = answer.get("attempt"), answer.get("state")
        if not isinstance(attempt, int) or not isinstance(state, str):
            return
        with self._lock:
            if attempt < self._view[0] or (attempt, state) == self._view:
                return
            self._view = (attempt, state)
        log.info("the coordinator says: attempt %d is %s", attempt, state)
        self._wake()

    def _poll(self) -> None:
        failures = 0
        while not self._closed.is_set():
            attempt, state = self.view()
            target = f"/next?after={attempt}" + ("&failed=1" if state == FAILED else "")
            try:
                status, answer = request_json(self.address, "GET", target, timeout=LONG_POLL_SECONDS + 10)
            except (OSError, http.client.HTTPException) as error:
                status, answer = 0, {"error": str(error)}
            if status == 200 and answer is not None:
                failures = 0
                self._learn(answer)
                continue
            if failures == 0:
                log.warning("cannot reach the coordinator at %s:%d (%s): retrying", *self.address, status or answer)
            self._closed.wait(RETRY_SECONDS[min(failures, len(RETRY_SECONDS) - 1)])
            failures += 1

    def _deliver(self) -> None:
        while True:
            report = self._reports.get()
            try:
                if report is None:
                    return
                self._send(report)
            finally:
                self._reports.task_done()

    def _send(self, report: dict[str, Any]) -> None:
        """Deliver one report, retrying until the coordinator answers (it may start after this pod), refuses it,
        or the link closes."""
        tries = 0
        while True:
            try:
                status, _ = request_json(self.address, "POST", "/report", body=report, key=self.key)
            except (OSError, http.client.HTTPException) as error:
                status, problem = 0, str(error)
            else:
                problem = f"HTTP {status}"
            if status == 200:
                return
            if status in (400, 401, 404) or self._closed.wait(RETRY_SECONDS[min(tries, len(RETRY_SECONDS) - 1)]):
                break
            tries += 1
        log.error("could not report %s of attempt %d: %s", report["event"], report["attempt"], problem)
