"""Which pods of the current attempt exist or existed, by UID: the record that tells a pod that vanished
(evicted and gone, its node lost, deleted by someone) from one that was never created, and that keeps every
failure counted exactly once across operator restarts."""

from collections.abc import Iterable, Mapping
from datetime import datetime

from trainingjob.children.observe import PodPhase, PodState
from trainingjob.model import PodOutcome, TrackedPod, TrainingJobStatus
from trainingjob.plan.types import Context, Decision


def decide(ctx: Context, status: TrainingJobStatus) -> Decision:
    """Record the attempt's pods, and release from the tracking gate those the written status will name (the pods
    of an earlier version of the operator; pods are now created with the tracking finalizer instead)."""
    status = observed(ctx, status)
    records = Records(status.tracked_pods)
    pods = ctx.pods_of(status.current_pods_attempt)
    held = [p for p in pods if p.gated and not p.deleting and records.of(p) is not None]
    return Decision(status, ungate=tuple(p.name for p in held))


class Pods:
    """Pods found by what a record holds: its UID, or its name when it was read back without one."""

    def __init__(self, pods: Iterable[PodState]) -> None:
        self.by_uid = {p.uid: p for p in pods if p.uid}
        self.by_name = {p.name: p for p in self.by_uid.values()}

    def of(self, record: TrackedPod) -> PodState | None:
        return self.by_uid.get(record.uid) if record.uid else self.by_name.get(record.name)


class Records:
    """Records found by a pod: by its UID, else by its name among the records without one."""

    def __init__(self, records: Iterable[TrackedPod]) -> None:
        self.by_uid: dict[str, TrackedPod] = {}
        self.bare: dict[str, TrackedPod] = {}
        for t in records:
            (self.by_uid if t.uid else self.bare)[t.uid or t.name] = t

    def of(self, pod: PodState) -> TrackedPod | None:
        return self.by_uid.get(pod.uid) or self.bare.get(pod.name)


def observed(ctx: Context, status: TrainingJobStatus) -> TrainingJobStatus:
    """Add the current attempt's pods seen now; note which succeeded; forget counted pods that are gone."""
    pods = Pods(ctx.pods_of(status.current_pods_attempt))
    kept = [t for t in status.tracked_pods if pods.of(t) is not None or t.outcome != PodOutcome.FAILED]
    known = Records(kept)
    added = [TrackedPod(name=p.name, uid=p.uid) for p in pods.by_uid.values() if known.of(p) is None]
    tracked = _first_finish(status, [_with_outcome(t, pods.of(t)) for t in [*kept, *added]], pods, ctx.now)
    tracked.sort(key=lambda t: (t.name, t.uid))
    if tracked == status.tracked_pods:
        return status
    return status.model_copy(update={"tracked_pods": tracked})


def _with_outcome(tracked: TrackedPod, pod: PodState | None) -> TrackedPod:
    if pod is not None and pod.phase == PodPhase.SUCCEEDED and tracked.outcome is None:
        return tracked.model_copy(update={"outcome": PodOutcome.SUCCEEDED})
    return tracked


def _first_finish(status: TrainingJobStatus, tracked: list[TrackedPod], pods: Pods, now: datetime) -> list[TrackedPod]:
    """The attempt's first success keeps when it finished (its pod's word, else now), on that one record alone: the
    completion grace counts from it (plan/completion.py), and a gang of thousands adds one time to its status."""
    if first_success(status) is not None:
        return tracked
    done = [(t, pod) for t in tracked if t.outcome == PodOutcome.SUCCEEDED and (pod := pods.of(t)) is not None]
    if not done:
        return tracked
    first, pod = min(done, key=lambda d: (d[1].finished_at or now, d[0].name))
    moment = pod.finished_at or now
    return [t.model_copy(update={"finished_at": moment, "uid": pod.uid}) if t is first else t for t in tracked]


def vanished(ctx: Context, status: TrainingJobStatus) -> list[TrackedPod]:
    """Tracked pods still running as far as the record knows, that are no longer there."""
    pods = Pods(ctx.pods_of(status.current_pods_attempt))
    return [t for t in status.tracked_pods if t.outcome is None and pods.of(t) is None]


def counted_uids(status: TrainingJobStatus) -> frozenset[str]:
    """The UIDs of the pods whose failure is counted already: a set, so a gang of 1,024 is checked in O(n)."""
    return frozenset(t.uid for t in status.tracked_pods if t.outcome == PodOutcome.FAILED and t.uid)


def first_success(status: TrainingJobStatus) -> datetime | None:
    """When the first of the attempt's pods that succeeded finished (as recorded)."""
    return min((t.finished_at for t in status.tracked_pods if t.finished_at is not None), default=None)


def succeeded_names(status: TrainingJobStatus) -> set[str]:
    return {t.name for t in status.tracked_pods if t.outcome == PodOutcome.SUCCEEDED}


def counted_failed(status: TrainingJobStatus, failed: list[PodState], gone: list[TrackedPod]) -> TrainingJobStatus:
    """Record failures as counted: failed pods stay tracked (as Failed, by UID) until gone; vanished ones are
    dropped."""
    pods, gone_records = Pods(failed), {(t.name, t.uid) for t in gone}
    tracked = [
        t.model_copy(update={"outcome": PodOutcome.FAILED, "uid": pod.uid}) if (pod := pods.of(t)) else t
        for t in status.tracked_pods
        if (t.name, t.uid) not in gone_records
    ]
    known = {t.uid for t in tracked}
    tracked += [TrackedPod(name=p.name, uid=p.uid, outcome=PodOutcome.FAILED) for p in failed if p.uid not in known]
    return status.model_copy(update={"tracked_pods": sorted(tracked, key=lambda t: (t.name, t.uid))})


def created(status: TrainingJobStatus, pods: Mapping[str, str]) -> TrainingJobStatus:
    """After the actions: pods just created (name -> UID), tracked at once so a quick vanish is not missed."""
    known = {t.uid for t in status.tracked_pods}
    added = [TrackedPod(name=name, uid=uid) for name, uid in pods.items() if uid and uid not in known]
    if not added:
        return status
    tracked = sorted([*status.tracked_pods, *added], key=lambda t: (t.name, t.uid))
    return status.model_copy(update={"tracked_pods": tracked})
