"""Rank 0's progress: GET /progress (JSON) and GET /metrics (Prometheus text) plus an atomic JSON file. The endpoint
is bounded as the agent's is (trainer.bounded_http): at most MAX_CONNECTIONS requests in flight, and an idle or slow
client loses its connection, and its thread, after 10 s."""

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from trainer.bounded_http import BoundedHandler, BoundedHTTPServer

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 16  # the operator, Prometheus, tjctl and people: each a request at a time

_METRICS = (
    ("step", "trainingjob_trainer_step", "gauge", "Training steps completed."),
    ("loss", "trainingjob_trainer_loss", "gauge", "Loss of the last step."),
    ("samplesPerSecond", "trainingjob_trainer_samples_per_second", "gauge", "Recent training throughput."),
    ("attempt", "trainingjob_trainer_attempt", "gauge", "The job attempt this trainer belongs to."),
    ("heartbeat", "trainingjob_trainer_heartbeat_timestamp_seconds", "gauge", "When the last step finished."),
    (
        "lastCheckpointStep",
        "trainingjob_trainer_last_checkpoint_step",
        "gauge",
        "Step of the last checkpoint.",
    ),
    (
        "lastCheckpointTime",
        "trainingjob_trainer_last_checkpoint_timestamp_seconds",
        "gauge",
        "Last checkpoint.",
    ),
)


def render_metrics(progress: dict[str, Any]) -> str:
    """The Prometheus text exposition format (version 0.0.4) of a progress snapshot."""
    lines = []
    for key, name, kind, help_text in _METRICS:
        value = progress.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name} {float(value)!r}"]
    return "\n".join(lines) + "\n"


# Kubernetes keeps what a container wrote here (at most 4096 bytes) in its pod's status once it has exited: the
# operator reads rank 0's last progress from it, the final checkpoint included, when the endpoint is gone.
TERMINATION_MESSAGE = Path("/dev/termination-log")
TERMINATION_MESSAGE_BYTES = 4096
_FINAL_FIELDS = (
    "attempt",
    "step",
    "loss",
    "heartbeat",
    "samplesPerSecond",
    "finished",
    "accuracy",
    "totalSteps",
    "metrics",
    "metricsStep",
    "resumedFromStep",
    "firstStepTime",
    "checkpointStallSeconds",
    "checkpointPacing",
)
_CLEARED_FIELDS = ("checkpointsCleared",)  # a sweep's trial or sweeper: the folders it removed
_CHECKPOINT_FIELDS = ("lastCheckpointStep", "lastCheckpointPath", "lastCheckpointTime", "checkpointsKept")


def final_report(progress: dict[str, Any]) -> str:
    """The last progress as a termination message: the fields the operator reads, within the size Kubernetes keeps
    (the checkpoint is left out rather than cut when its path is too long, then the folders a sweep's job removed,
    then both)."""
    for fields in (
        _FINAL_FIELDS + _CHECKPOINT_FIELDS + _CLEARED_FIELDS,
        _FINAL_FIELDS + _CHECKPOINT_FIELDS,
        _FINAL_FIELDS + _CLEARED_FIELDS,
        _FINAL_FIELDS,
    ):
        body = json.dumps({key: progress[key] for key in fields if key in progress}, sort_keys=True)
        if len(body.encode()) <= TERMINATION_MESSAGE_BYTES:
            return body
    return json.dumps({"attempt": progress.get("attempt"), "step": progress.get("step")})


def write_text_atomically(path: Path, text: str) -> None:
    """Write to a temporary name in the same folder, then rename: readers never see half a file."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temp.write_text(text)
    os.replace(temp, path)


def write_json_atomically(path: Path, data: dict[str, Any]) -> None:
    """The JSON of `data`, written atomically."""
    write_text_atomically(path, json.dumps(data, sort_keys=True))


class ProgressReporter:
    """Holds the latest progress; serves it over HTTP and mirrors it to a file (at most once per interval)."""

    def __init__(
        self,
        attempt: int,
        port: int | None = None,
        file: Path | None = None,
        *,
        file_interval: float = 1.0,
        clock: Callable[[], float] = time.time,
        termination_message: Path = TERMINATION_MESSAGE,
    ) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._state: dict[str, Any] = {"attempt": attempt, "step": 0, "heartbeat": clock(), "finished": False}
        self._port = port
        self._file = file
        self._file_interval = file_interval
        self._termination_message = termination_message
        self._file_written_at = float("-inf")
        self._rate_anchor: tuple[float, int, int] | None = None  # (time, samples, step) of the last rate update
        self._samples = 0
        self._server: BoundedHTTPServer | None = None

    def start(self) -> "ProgressReporter":
        """Open the HTTP endpoint (if a port was given) and write the first file."""
        if self._port is not None:
            self._server = BoundedHTTPServer(self._port, _handler_for(self), MAX_CONNECTIONS)
            threading.Thread(target=self._server.serve_forever, name="progress-http", daemon=True).start()
            log.info("progress endpoint on port %d", self._port)
        self.flush()
        return self

    def snapshot(self) -> dict[str, Any]:
        """A copy of the current progress."""
        with self._lock:
            return dict(self._state)

    def report(self, step: int, loss: float, samples: int) -> None:
        """Record a finished step; `samples` is how many samples the whole job consumed in it. The first one's time
        stays as firstStepTime: the operator counts this attempt's training from it."""
        now = self._clock()
        with self._lock:
            self._state.setdefault("firstStepTime", now)
            self._samples += samples
            if self._rate_anchor is None:
                self._rate_anchor = (now, self._samples, step)
            elif now - self._rate_anchor[0] >= 1.0:
                elapsed = now - self._rate_anchor[0]
                self._state["samplesPerSecond"] = (self._samples - self._rate_anchor[1]) / elapsed
                self._state.update(_eta(self._state.get("totalSteps"), step, (step - self._rate_anchor[2]) / elapsed))
                self._rate_anchor = (now, self._samples, step)
            self._state.update(step=step, loss=loss, heartbeat=now)
        if now - self._file_written_at >= self._file_interval:
            self.flush()

    def alive(self) -> None:
        """The heartbeat, now, without a step: progressDeadlineSeconds is measured from it."""
        self.update(heartbeat=self._clock())

    def update(self, **fields: Any) -> None:
        """Set extra fields (accuracy, lastCheckpoint*, staleness, ...) and write the file now."""
        with self._lock:
            self._state.update(fields)
        self.flush()

    def checkpointed(
        self, step: int, path: str, at: float, stalled: float | None = None, kept: Sequence[int] = (), **fields: Any
    ) -> None:
        """Record the last checkpoint, the steps of the complete ones on the volume (`kept`, newest first), and the
        seconds this attempt's saves have held training up so far (and `fields` that changed with the save, in the
        same write)."""
        stall = {"checkpointStallSeconds": round(stalled, 3)} if stalled is not None else {}
        held = {"checkpointsKept": list(kept)} if kept else {}
        self.update(lastCheckpointStep=step, lastCheckpointPath=path, lastCheckpointTime=at, **stall, **held, **fields)

    def flush(self) -> None:
        """Write the progress file now (if one was configured)."""
        if self._file is None:
            return
        self._file_written_at = self._clock()
        try:
            write_json_atomically(self._file, self.snapshot())
        except OSError as error:
            log.warning("could not write the progress file %s: %s", self._file, error)

    def close(self) -> None:
        """Write the file and the termination message (where the container has one) a last time, and stop the
        HTTP endpoint."""
        self.flush()
        if self._termination_message.exists():
            try:
                self._termination_message.write_text(final_report(self.snapshot()))
            except OSError as error:
                log.warning("could not write the termination message: %s", error)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def _eta(total: object, step: int, steps_per_second: float) -> dict[str, float]:
    """etaSeconds: the steps left at the recent step rate (nothing without a total or a rate)."""
    if not isinstance(total, int) or steps_per_second <= 0:
        return {}
    return {"etaSeconds": round(max(0, total - step) / steps_per_second, 1)}


def _handler_for(reporter: ProgressReporter) -> type[BoundedHandler]:
    class Handler(BoundedHandler):
        def do_GET(self) -> None:
            if self.path == "/progress":
                body, kind = json.dumps(reporter.snapshot()).encode(), "application/json"
            elif self.path == "/metrics":
                body, kind = render_metrics(reporter.snapshot()).encode(), "text/plain; version=0.0.4"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler
