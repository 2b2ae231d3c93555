"""The dashboard's view of jobs, as pure functions: a job's summary (computed once, when the cache stores the job),
a page of summaries with its counts, and the cluster's counts. A stored job the model no longer accepts reaches
here as it is, so every field is read defensively: a wrong type reads as absent."""

import json
import math
from bisect import bisect_right
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from heapq import nlargest
from typing import Any

from trainingjob.model import Phase
from trainingjob.model.base import parse_quantity

GPU = "nvidia.com/gpu"
PHASES = tuple(phase.value for phase in Phase)
MAX_GPUS_PER_POD = Decimal(1 << 16)
RECENT_FAILURES = 20
GPU_STATES = {"Running": "running", "Pending": "pending", "Restarting": "pending", "Suspended": "suspended"}
Key = tuple[str, str]  # (namespace, name)


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_number(value: Any) -> float | None:
    """A finite number (JSON has no NaN or infinity)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def as_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def role_gpus(role: Any) -> int:
    """nvidia.com/gpu of one pod of the role (its limit, else its request) times its replicas."""
    role = as_dict(role)
    resources = as_dict(role.get("resources"))
    amount = as_dict(resources.get("limits")).get(GPU, as_dict(resources.get("requests")).get(GPU))
    if not isinstance(amount, str | int) or isinstance(amount, bool):
        return 0
    try:
        each = parse_quantity(amount)
    except (InvalidOperation, ValueError):
        return 0
    replicas = as_int(role.get("replicas"))
    replicas = 1 if replicas is None else max(replicas, 0)  # 1: the model's default
    if not each.is_finite() or not 0 < each <= MAX_GPUS_PER_POD:
        return 0  # none, or not a number of GPUs (a stored object the model no longer checks)
    return int(each.to_integral_value()) * replicas


def job_gpus(spec: dict[str, Any]) -> int:
    """The GPUs a job's pods request together: its workers' and its parameter servers'."""
    servers = role_gpus(spec["parameterServers"]) if spec.get("parameterServers") is not None else 0
    return role_gpus(spec.get("workers")) + servers


@dataclass(frozen=True)
class Summary:
    """One job's summary: the JSON the dashboard gets (`fields`, serialized once as `body`), what pages filter and
    count by, and its last failure for the cluster view."""

    fields: dict[str, Any]
    body: bytes
    key: Key
    phase: str
    gpus: int
    failure: dict[str, Any] | None


def summarize(manifest: dict[str, Any]) -> Summary:
    """The summary of a job, from its manifest as the API returns it."""
    meta, spec, status = (
        as_dict(manifest.get("metadata")),
        as_dict(manifest.get("spec")),
        as_dict(manifest.get("status")),
    )
    progress, restarts = as_dict(status.get("progress")), as_dict(status.get("restarts"))
    failure = as_dict(status.get("lastFailure"))
    labels = {k: v for k, v in as_dict(meta.get("labels")).items() if isinstance(v, str)}
    key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
    phase = status["phase"] if status.get("phase") in PHASES else Phase.PENDING.value
    gpus = job_gpus(spec)
    fields = {
        "namespace": key[0],
        "name": key[1],
        "labels": labels,
        "created": as_str(meta.get("creationTimestamp")),
        "phase": phase,
        "attempt": as_int(status.get("attempt")) or 0,
        "restarts": {kind: as_int(restarts.get(kind)) or 0 for kind in ("retryable", "oom", "disruption", "stalled")},
        "mode": as_str(spec.get("mode")) or "DDP",
        "workers": as_int(as_dict(spec.get("workers")).get("replicas")) or 1,
        "parameterServers": as_int(as_dict(spec.get("parameterServers")).get("replicas")) or 0,
        "gpus": gpus,
        "step": as_int(progress.get("step")),
        "totalSteps": as_int(progress.get("totalSteps")),
        "percent": as_number(progress.get("percent")),
        "loss": as_number(progress.get("loss")),
        "samplesPerSecond": as_number(progress.get("samplesPerSecond")),
        "eta": as_str(progress.get("estimatedCompletionTime")),
        "reason": as_str(failure.get("failureClass")),
        "completed": as_str(status.get("completionTime")),
    }
    body = json.dumps(fields, separators=(",", ":")).encode()
    return Summary(fields, body, key, phase, gpus, _failure(fields, failure) if failure else None)


def _failure(fields: dict[str, Any], failure: dict[str, Any]) -> dict[str, Any]:
    return {
        "namespace": fields["namespace"],
        "name": fields["name"],
        "time": as_str(failure.get("time")),
        "failureClass": as_str(failure.get("failureClass")),
        "reason": as_str(failure.get("reason")),
        "pod": as_str(failure.get("pod")),
    }


@dataclass(frozen=True)
class Page:
    """Up to `limit` summaries after a key, whether more follow, and the counts over every match."""

    items: list[Summary]
    more: bool
    total: int
    phases: dict[str, int]


def select(summaries: list[Summary], *, phase: str | None, search: str, after: Key | None, limit: int | None) -> Page:
    """The page of `summaries` (in key order) after `after` whose phase is `phase` (any when None) and whose name
    contains `search`; `phases` counts the name matches of every phase, `total` those of `phase` too."""
    found = [s for s in summaries if search in s.key[1]] if search else summaries
    phases = dict.fromkeys(PHASES, 0) | Counter(s.phase for s in found)
    if phase is not None:
        found = [s for s in found if s.phase == phase]
    start = bisect_right(found, after, key=lambda s: s.key) if after is not None else 0
    end = len(found) if limit is None else start + limit
    return Page(found[start:end], end < len(found), len(found), phases)


def page_body(page: Page, following: str | None) -> bytes:
    """The JobSummaryList JSON, joined from the summaries' own serialized JSON."""
    tail = json.dumps({"continue": following, "total": page.total, "phases": page.phases}, separators=(",", ":"))
    return b'{"items":[' + b",".join(s.body for s in page.items) + b"]," + tail[1:].encode()


def _instant(text: Any) -> datetime:
    """A failure's time, to sort by; the earliest possible when it is not a time."""
    try:
        parsed = datetime.fromisoformat(str(text))
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def cluster(summaries: Sequence[Summary]) -> dict[str, Any]:
    """Jobs per phase, GPUs of running, pending and suspended jobs, and the newest last failures."""
    phases = dict.fromkeys(PHASES, 0)
    gpus = {"running": 0, "pending": 0, "suspended": 0}
    for summary in summaries:
        phases[summary.phase] += 1
        if summary.phase in GPU_STATES:
            gpus[GPU_STATES[summary.phase]] += summary.gpus
    failures = [s.failure for s in summaries if s.failure is not None]
    recent = nlargest(RECENT_FAILURES, failures, key=lambda f: _instant(f["time"]))
    return {"jobs": len(summaries), "phases": phases, "gpus": gpus, "recentFailures": recent}
