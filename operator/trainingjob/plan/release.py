"""Which pods the operator lets go of, pure: each pod is created with the tracking finalizer (children/naming.py),
so it cannot vanish before the job's status records it; the finalizer is removed only once the status written
first no longer needs the pod. That is when the job is finished or suspended (nothing of its pods counts any
more), when the pod is not of the attempt the job runs in, or when its outcome is recorded (tracked Succeeded or
Failed); and for every pod the operator deletes, at once after the delete: it decided to on a status that counts
whatever of the pod counts. A pod the status still needs keeps the finalizer while it ends and while it is being
deleted by someone else, until the pass that records it. The pods of a job that is gone or being deleted (and a
namesake's) are let go of once they are being deleted (`orphans`): the garbage collector's delete, or anyone's."""

from collections.abc import Mapping, Sequence
from typing import Any

from trainingjob.children.observe import PodState, controller_uid, holds_tracking_finalizer
from trainingjob.model import Phase, PodOutcome, TrainingJobStatus
from trainingjob.plan.tracking import Records


def needed(status: TrainingJobStatus, records: Records, pod: PodState) -> bool:
    """Whether the status still waits to learn how `pod` ends: a pod of the attempt the job runs in, while the job
    is neither finished nor suspended, not recorded with an outcome (recorded as running, or not yet recorded).
    `records`: the status's tracked pods."""
    if status.phase.is_terminal or status.phase == Phase.SUSPENDED or pod.attempt != status.current_pods_attempt:
        return False
    record = records.of(pod)
    return record is None or record.outcome not in (PodOutcome.SUCCEEDED, PodOutcome.FAILED)


def released(pods: Sequence[PodState], status: TrainingJobStatus, going: Sequence[str]) -> tuple[str, ...]:
    """Of the job's `pods`, those whose tracking finalizer goes once `status` is written: those deleted now
    (`going`), every pod of a finished job, and the pods that have ended or are being deleted that the status no
    longer needs."""
    deleted, records = set(going), Records(status.tracked_pods)
    finished = status.phase.is_terminal
    return tuple(
        p.name
        for p in pods
        if p.held
        and (p.name in deleted or finished or ((p.is_finished or p.deleting) and not needed(status, records, p)))
    )


def orphans(pods: Sequence[Mapping[str, Any]], job_uid: str | None) -> dict[str, str]:
    """The pods being deleted that hold the tracking finalizer and are not the job's of `job_uid` (None: the job is
    gone or being deleted), name -> UID: nothing will ever count them."""
    return {
        str(p["metadata"]["name"]): str(p["metadata"].get("uid") or "")
        for p in pods
        if holds_tracking_finalizer(p)
        and (p.get("metadata") or {}).get("deletionTimestamp")
        and (job_uid is None or controller_uid(p) != job_uid)
    }
