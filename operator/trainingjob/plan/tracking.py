"""Which pods of the current attempt exist or existed, by UID: the record that tells a pod that vanished
(evicted and gone, its node lost, deleted by someone) from one that was never created, and that keeps every
failure counted exactly once across operator restarts."""

from collections.abc import Mapping
from datetime import datetime

from trainingjob.children.observe import PodPhase, PodState
from trainingjob.model import PodOutcome, TrackedPod, TrainingJobStatus
from trainingjob.plan.types import Context, Decision


def decide(ctx: Context, status: TrainingJobStatus) -> Decision:
    """Record the attempt's pods, and release from the tracking gate those the written status will name (the pods
    of an earlier version of the operator; pods are now created with the tracking finalizer instead)."""
    status = observed(ctx, status)
    tracked = {t.uid for t in status.tracked_pods}
    held = [p for p in ctx.pods_of(status.current_pods_attempt) if p.gated and not p.deleting and p.uid in tracked]
    return Decision(status, ungate=tuple(p.name for p in held))


def observed(ctx: Context, status: TrainingJobStatus) -> TrainingJobStatus:
    """Add the current attempt's pods seen now; note which succeeded; forget counted pods that are gone."""
    pods = {p.uid: p for p in ctx.pods_of(status.current_pods_attempt) if p.uid}
    kept = [t for t in status.tracked_pods if t.uid in pods or t.outcome != PodOutcome.FAILED]
    known = {t.uid for t in kept}
    added = [TrackedPod(name=p.name, uid=p.uid) for p in pods.values() if p.uid not in known]
    tracked = _first_finish(status, [_with_outcome(t, pods.get(t.uid)) for t in [*kept, *added]], pods, ctx.now)
    tracked.sort(key=lambda t: (t.name, t.uid))
    if tracked == status.tracked_pods:
        return status
    return status.model_copy(update={"tracked_pods": tracked})


def _with_outcome(tracked: TrackedPod, pod: PodState | None) -> TrackedPod:
    if pod is not None and pod.phase == PodPhase.SUCCEEDED and tracked.outcome is None:
        return tracked.model_copy(update={"outcome": PodOutcome.SUCCEEDED})
    return tracked


def _first_finish(
    status: TrainingJobStatus, tracked: list[TrackedPod], pods: Mapping[str, PodState], now: datetime
) -> list[TrackedPod]:
    """The attempt's first success keeps when it finished (its pod's word, else now), on that one record alone: the
    completion grace counts from it (plan/completion.py), and a gang of thousands adds one time to its status."""
    if first_success(status) is not None:
        return tracked
    done = [t for t in tracked if t.outcome == PodOutcome.SUCCEEDED and t.uid in pods]
    if not done:
        return tracked
    first = min(done, key=lambda t: (pods[t.uid].finished_at or now, t.name))
    moment = pods[first.uid].finished_at or now
    return [t.model_copy(update={"finished_at": moment}) if t is first else t for t in tracked]


def vanished(ctx: Context, status: TrainingJobStatus) -> list[TrackedPod]:
    """Tracked pods still running as far as the record knows, that are no longer there."""
    present = {p.uid for p in ctx.pods_of(status.current_pods_attempt)}
    return [t for t in status.tracked_pods if t.outcome is None and t.uid not in present]


def counted_uids(status: TrainingJobStatus) -> frozenset[str]:
    """The UIDs of the pods whose failure is counted already: a set, so a gang of 1,024 is checked in O(n)."""
    return frozenset(t.uid for t in status.tracked_pods if t.outcome == PodOutcome.FAILED)


def first_success(status: TrainingJobStatus) -> datetime | None:
    """When the first of the attempt's pods that succeeded finished (as recorded)."""
    return min((t.finished_at for t in status.tracked_pods if t.finished_at is not None), default=None)


def succeeded_names(status: TrainingJobStatus) -> set[str]:
    return {t.name for t in status.tracked_pods if t.outcome == PodOutcome.SUCCEEDED}


def counted_failed(status: TrainingJobStatus, failed: list[PodState], gone: list[TrackedPod]) -> TrainingJobStatus:
    """Record failures as counted: failed pods stay tracked (as Failed) until gone; vanished ones are dropped."""
    failed_uids, gone_uids = {p.uid for p in failed}, {t.uid for t in gone}
    tracked = [
        t.model_copy(update={"outcome": PodOutcome.FAILED}) if t.uid in failed_uids else t
        for t in status.tracked_pods
        if t.uid not in gone_uids
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
