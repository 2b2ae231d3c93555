"""The pods of a job as the dashboard lists them, from the pods' JSON as Kubernetes returns it (pure functions)."""

from typing import Any

from trainingjob.children.naming import ATTEMPT_LABEL, CONTAINER_NAME, INDEX_LABEL, ROLE_LABEL
from trainingjob_api.summaries import as_dict, as_int, as_str


def _label_int(labels: dict[str, Any], key: str) -> int | None:
    value = labels.get(key)
    return int(value) if isinstance(value, str) and value.isdigit() and len(value) < 10 else None


def _trainer(status: dict[str, Any]) -> dict[str, Any]:
    """The trainer container's status; the first container's when none is named so."""
    containers = [c for c in status.get("containerStatuses") or [] if isinstance(c, dict)]
    return next((c for c in containers if c.get("name") == CONTAINER_NAME), containers[0] if containers else {})


def _ready(status: dict[str, Any]) -> bool:
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def pod_row(pod: dict[str, Any]) -> dict[str, Any]:
    """One pod: its slot (role, index, attempt), where and how it runs, and how its trainer ended or waits."""
    meta, spec, status = as_dict(pod.get("metadata")), as_dict(pod.get("spec")), as_dict(pod.get("status"))
    labels = as_dict(meta.get("labels"))
    trainer = _trainer(status)
    state = as_dict(trainer.get("state"))
    ended = as_dict(state.get("terminated")) or as_dict(as_dict(trainer.get("lastState")).get("terminated"))
    waiting = as_dict(state.get("waiting"))
    return {
        "name": str(meta.get("name", "")),
        "role": as_str(labels.get(ROLE_LABEL)),
        "index": _label_int(labels, INDEX_LABEL),
        "attempt": _label_int(labels, ATTEMPT_LABEL),
        "phase": as_str(status.get("phase")),
        "ready": _ready(status),
        "node": as_str(spec.get("nodeName")),
        "created": as_str(meta.get("creationTimestamp")),
        "started": as_str(status.get("startTime")),
        "finished": as_str(ended.get("finishedAt")),
        "reason": as_str(waiting.get("reason")) or as_str(ended.get("reason")) or as_str(status.get("reason")),
        "exitCode": as_int(ended.get("exitCode")),
        "restarts": as_int(trainer.get("restartCount")) or 0,
    }


def pod_rows(pods: list[Any]) -> list[dict[str, Any]]:
    """The rows of the pods, newest attempt first, then by role, index and name."""
    rows = [pod_row(pod) for pod in pods if isinstance(pod, dict)]
    return sorted(rows, key=lambda r: (-(r["attempt"] or 0), r["role"] or "", r["index"] or 0, r["name"]))
