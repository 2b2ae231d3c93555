"""A stored job the model refuses (written before a CRD upgrade, say) fails, saying why, and is then
cleaned up and deleted after its TTL like any finished job, under as much of its runPolicy as is valid."""

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from trainingjob.children.observe import Observed
from trainingjob.model import ConditionType, Phase, RunPolicy, TrainingJobStatus
from trainingjob.plan import estimate, finished
from trainingjob.plan.conditions import set_condition
from trainingjob.plan.release import released
from trainingjob.plan.types import Event, Plan

REASON = "InvalidSpec"
TRACKED_KEYS = ("trackedPods", "trackedPodRanges")


def salvaged_status(raw: Any) -> TrainingJobStatus:
    """The stored status, keeping every field that is still valid on its own."""
    if not isinstance(raw, Mapping):
        return TrainingJobStatus()
    try:
        return TrainingJobStatus.model_validate(raw)
    except ValidationError:
        pass
    valid: dict[str, Any] = {}
    for key, value in raw.items():
        try:
            TrainingJobStatus.model_validate({key: value})
        except ValidationError:
            continue
        valid[key] = value
    try:
        return TrainingJobStatus.model_validate(valid)
    except ValidationError:
        # The pod records, each valid alone, disagree (a name twice): dropped. The pods, held by their finalizers,
        # are recorded again; a failure counted before and still there would be counted again (reconcile/job.py).
        return TrainingJobStatus.model_validate({k: v for k, v in valid.items() if k not in TRACKED_KEYS})


def _run_policy(manifest: Mapping[str, Any]) -> RunPolicy:
    spec = manifest.get("spec")
    try:
        return RunPolicy.model_validate(spec.get("runPolicy") or {} if isinstance(spec, Mapping) else {})
    except ValidationError:
        return RunPolicy()


def plan_invalid(manifest: Mapping[str, Any], error: ValidationError, observed: Observed, now: datetime) -> Plan:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    message = f"The job's spec is invalid: {where}: {first['msg']}."[:4096]
    status = salvaged_status(manifest.get("status"))
    generation = (manifest.get("metadata") or {}).get("generation")
    events: tuple[Event, ...] = ()
    if not status.phase.is_terminal:
        conditions = set_condition(
            status.conditions, ConditionType.FAILED, True, REASON, message, now=now, generation=generation
        )
        status = estimate.stopped(status).model_copy(
            update={"phase": Phase.FAILED, "conditions": conditions, "completion_time": status.completion_time or now}
        )
        events = (Event("Warning", REASON, message),)
    done = finished.cleanup(observed, now, status, _run_policy(manifest))
    return Plan(
        status=done.status,
        delete=done.delete,
        release=released(observed.pods, done.status, done.delete),
        events=events,
        requeue_after=done.requeue_after,
        delete_job=done.delete_job,
        decisions=("invalid",),
    )
