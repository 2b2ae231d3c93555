"""The trainer's progress report (rank 0's JSON, from its endpoint or file), read as untrusted input: a pod
can answer anything, and nothing it answers may raise or reach the status unchecked."""

import json
import math
import re
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from trainingjob.children.naming import CONTAINER_NAME
from trainingjob.children.observe import bounded
from trainingjob.children.pacing import reason
from trainingjob.model import CheckpointStatus, Progress
from trainingjob.model.status import CHECKPOINT_FOLDER, MAX_CLEARED, MAX_METRICS, METRIC_NAME, CheckpointPacing
from trainingjob.model.values import MAX_KEPT

MAX_REPORT_BYTES = 64 * 1024
MAX_STEP = 2**53  # beyond any real run; JSON numbers past it lose precision anyway
MAX_SECONDS = 10 * 365 * 86400.0  # a duration longer than any run
_EPOCH_RANGE = (0.0, 32_503_680_000.0)  # 1970 to the year 3000
_METRIC_NAME = re.compile(METRIC_NAME)
_FOLDER = re.compile(CHECKPOINT_FOLDER)

Report = tuple[Progress | None, CheckpointStatus | None]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer of hundreds of digits
        return None
    return number if math.isfinite(number) else None


def _count(value: Any) -> int | None:
    number = _number(value)
    return int(number) if number is not None and 0 <= number <= MAX_STEP else None


def _seconds(value: Any) -> float | None:
    """A duration: a finite number from 0 to MAX_SECONDS, to the millisecond."""
    number = _number(value)
    return round(number, 3) if number is not None and 0 <= number <= MAX_SECONDS else None


def _time(value: Any) -> datetime | None:
    number = _number(value)
    if number is None or not _EPOCH_RANGE[0] <= number <= _EPOCH_RANGE[1]:
        return None
    return datetime.fromtimestamp(number, UTC)


def progress_from_report(report: Any) -> Report:
    """The report as status fields; (None, None) for anything that is not a well-formed report."""
    if not isinstance(report, dict):
        return None, None
    step, heartbeat = _count(report.get("step", 0)), _time(report.get("heartbeat"))
    if step is None:
        return None, None
    rate, metrics = _number(report.get("samplesPerSecond")), _metrics(report.get("metrics"))
    try:
        progress = Progress(
            step=step,
            loss=_number(report.get("loss")),
            samples_per_second=rate if rate is not None and rate >= 0 else None,
            last_heartbeat_time=heartbeat,
            attempt=_count(report.get("attempt")),
            total_steps=_count(report.get("totalSteps")),
            estimated_completion_time=_estimate(heartbeat, report.get("etaSeconds")),
            metrics=metrics,
            metrics_step=_count(report.get("metricsStep")) if metrics else None,
            resumed_from_step=_count(report.get("resumedFromStep")),
            first_step_time=_time(report.get("firstStepTime")),
            checkpoint_stall_seconds=_seconds(report.get("checkpointStallSeconds")),
            checkpoint_pacing=pacing_status(report.get("checkpointPacing")),
            finished=True if report.get("finished") is True else None,
            checkpoints_cleared=_folders(report.get("checkpointsCleared")),
        )
    except ValidationError:
        return None, None
    return progress, _checkpoint(report)


def pacing_status(report: Any) -> CheckpointPacing | None:
    """The trainer's checkpointPacing (untrusted: anything malformed is left out) as the status shows it."""
    if not isinstance(report, dict) or not isinstance(report.get("auto"), bool):
        return None
    bound = report.get("bound") if report.get("bound") in ("min", "max") else None
    pacing = CheckpointPacing(
        auto=report["auto"],
        interval_seconds=_seconds(report.get("intervalSeconds")),
        optimal_seconds=_seconds(report.get("optimalSeconds")),
        save_seconds=_seconds(report.get("saveSeconds")),
        mtbf_seconds=_seconds(report.get("mtbfSeconds")),
        bound=bound,
    )
    return pacing.model_copy(update={"reason": reason(pacing)})


def _estimate(heartbeat: datetime | None, left: Any) -> datetime | None:
    """When the trainer expects to be done: its heartbeat plus the seconds it said were left then."""
    seconds = _number(left)
    if heartbeat is None or seconds is None or seconds < 0:
        return None
    return _time(heartbeat.timestamp() + seconds)


def _metrics(value: Any) -> dict[str, float] | None:
    """The well-named finite numbers of a metrics map, the first MAX_METRICS by name; None when none is left."""
    if not isinstance(value, dict):
        return None
    kept = {
        name: number
        for name, raw in value.items()
        if isinstance(name, str) and _METRIC_NAME.fullmatch(name) and (number := _number(raw)) is not None
    }
    return dict(sorted(kept.items())[:MAX_METRICS]) or None


def _folders(value: Any) -> list[str] | None:
    """The well-formed checkpoint folders (<job name>/<job uid>) of a list, the first MAX_CLEARED; None for
    anything else."""
    if not isinstance(value, list):
        return None
    return [item for item in value if isinstance(item, str) and _FOLDER.fullmatch(item)][:MAX_CLEARED]


def _checkpoint(report: dict[str, Any]) -> CheckpointStatus | None:
    step, at = _count(report.get("lastCheckpointStep")), _time(report.get("lastCheckpointTime"))
    if step is None or at is None:
        return None
    path = bounded(report.get("lastCheckpointPath"), 4096)
    return CheckpointStatus(step=step, path=path, time=at, kept=_kept(report.get("checkpointsKept"), step))


def _kept(value: Any, step: int) -> list[int] | None:
    """The steps of the checkpoints on the volume, newest first, the last one's among them; None for anything
    else (a trainer that does not say, or says something malformed)."""
    if not isinstance(value, list) or not value or len(value) > MAX_KEPT:
        return None
    steps = [_count(item) if isinstance(item, int) else None for item in value]
    if any(s is None for s in steps) or step not in steps:
        return None
    return sorted({s for s in steps if s is not None}, reverse=True)


def final_report(pod: Any) -> bytes | None:
    """What a trainer said as it exited: its container's termination message (Kubernetes keeps up to 4 KiB of
    /dev/termination-log in the pod status; a sidecar's is not the trainer's). None while it runs, or when it said
    nothing."""
    status = pod.get("status") if isinstance(pod, dict) else None
    containers = status.get("containerStatuses") if isinstance(status, dict) else None
    for container in containers if isinstance(containers, list) else []:
        if not isinstance(container, dict) or container.get("name") != CONTAINER_NAME:
            continue
        state = container.get("state")
        terminated = state.get("terminated") if isinstance(state, dict) else None
        message = terminated.get("message") if isinstance(terminated, dict) else None
        if isinstance(message, str) and message:
            return message.encode()
    return None


def parse_report(body: bytes) -> Report:
    """A report from raw bytes: at most MAX_REPORT_BYTES, any JSON at all, never an exception."""
    if len(body) > MAX_REPORT_BYTES:
        return None, None
    try:
        report = json.loads(body)
    except (ValueError, RecursionError):
        return None, None
    return progress_from_report(report)
