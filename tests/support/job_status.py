"""A job manifest's status as the operator's model reads it, parsed once per content.

The model-based tests check every job's status after every step, and parsing it was a fifth of their time."""

from typing import Any

from tests.support.fake_watch import clone

from trainingjob.model import TrainingJobStatus

_PARSED: dict[tuple[str, str], tuple[dict[str, Any], TrainingJobStatus]] = {}
_MOST = 4096


def job_status(job: dict[str, Any]) -> TrainingJobStatus:
    """The status of `job`, parsed. A parse is kept under the job's UID and resourceVersion and used again only for
    an equal status: a status changed without a new resourceVersion, or another cluster's job under the same UID, is
    parsed again. What it returns is shared: read it, never change it."""
    raw = job.get("status") or {}
    metadata = job.get("metadata") or {}
    key = (str(metadata.get("uid", "")), str(metadata.get("resourceVersion", "")))
    kept = _PARSED.get(key)
    if kept is not None and kept[0] == raw:
        return kept[1]
    status = TrainingJobStatus.model_validate(raw)
    if len(_PARSED) >= _MOST:
        _PARSED.clear()
    _PARSED[key] = (clone(raw), status)
    return status
