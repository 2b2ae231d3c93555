"""The Cluster ports reading jobs, pods and Services (and sweeps and their trials) from the runtime's memory
instead of the apiserver: a reconcile of a job that did not change reads nothing. Writes go to the direct
cluster, which passes what the apiserver answered to `Stores.saw`, so the stores never lag the operator's own
writes.

One lag remains that write-through cannot close: pods another writer created (an earlier leader) that the pod
watch has not delivered yet. A tracked pod missing from the store would count as vanished, a failure, so when the
job's status tracks a live pod the store has neither seen nor seen deleted (for a record without a UID: one whose
name it does not hold), that one reconcile lists the job's pods from the apiserver instead.

Writes are fenced: each is refused (NotLeading) once `may_write` says this operator no longer leads, so a
reconcile that outlived its leadership (one still running when the Lease was lost, or one of a leader paused past
its lease) stops at its next write instead of acting beside the new leader. Events are written once a minute at
most for the same cause (runtime/announced.py), and routine ones from one budget for the operator
(runtime/event_budget.py).
"""

from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import TypeVar

from trainingjob.children.agent import Gang
from trainingjob.children.naming import service_name
from trainingjob.children.progress_report import Report, parse_report
from trainingjob.children.workload import QueueState, WorkloadAction
from trainingjob.kube.ports import Cluster, Created, Manifest, Queues, SweepCluster
from trainingjob.model import TrainingJob, tracked
from trainingjob.plan import Event
from trainingjob.runtime.announced import Announced
from trainingjob.runtime.event_budget import EventBudget
from trainingjob.runtime.memory import Stores

T = TypeVar("T")


class NotLeading(Exception):  # noqa: N818  (a domain outcome, not a bug)
    """This operator no longer leads: the write was not sent."""


def _always() -> bool:
    return True


def _fenced(may_write: Callable[[], bool], direct: T) -> T:
    """`direct`, to write through, while this operator may write."""
    if not may_write():
        raise NotLeading("not leading: the write was not sent")
    return direct


def _may_have_ended(pod: Manifest) -> bool:
    """A pod that failed, is disrupted or is going: under a name recorded without a UID, it may be the pod of that
    name before (its failure counted, a new pod made since: the store has yet to see either), so the planner must
    not take it for the recorded one (model/tracked.py). A healthy pod under the name is the recorded one."""
    status = pod.get("status") or {}
    disrupted = any(c.get("type") == "DisruptionTarget" for c in status.get("conditions") or [])
    return bool(pod["metadata"].get("deletionTimestamp")) or status.get("phase") == "Failed" or disrupted


class CachedCluster:
    """Reads from `stores`, writes (and the rare fallback list) through `direct` while `may_write`."""

    def __init__(
        self,
        direct: Cluster,
        stores: Stores,
        *,
        on_fallback: Callable[[], None] = lambda: None,
        may_write: Callable[[], bool] = _always,
        announced: Announced | None = None,
        budget: EventBudget | None = None,
        on_skipped: Callable[[Event], None] = lambda event: None,
    ) -> None:
        self.direct, self.stores, self.may_write = direct, stores, may_write
        self.on_fallback = on_fallback  # called when a reconcile lists pods because the pod store had not caught up
        self.announced = announced or Announced()  # each cause's Event at most once a minute
        self.budget = budget or EventBudget()  # routine Events: a burst of them at most, then one a second
        self.on_skipped = on_skipped  # called for each Event the budget did not write

    def _fence(self) -> Cluster:
        return _fenced(self.may_write, self.direct)

    def read_job(self, namespace: str, name: str) -> Manifest | None:
        return self.stores.jobs.get(namespace, name)

    def list_pods(self, namespace: str, job: str) -> list[Manifest]:
        pods = self.stores.pods.of_job(namespace, job)
        present = {str(p["metadata"].get("uid")) for p in pods}
        record = tracked.stored((self.stores.jobs.get(namespace, job) or {}).get("status"))
        seen = all(uid in present or self.stores.pods.seen_deleted(uid) for uid in record.running_uids)
        by_name = {str(p["metadata"].get("name")): p for p in pods}
        named = [by_name[n] for n in record.names if n in by_name]
        if seen and record.running_names <= by_name.keys() and not any(map(_may_have_ended, named)):
            return pods
        self.on_fallback()
        return self.direct.list_pods(namespace, job)

    def read_service(self, namespace: str, job: str) -> Manifest | None:
        return self.stores.services.get(namespace, service_name(job))

    def log_tail(self, namespace: str, pod: str, lines: int) -> str:
        return self.direct.log_tail(namespace, pod, lines)

    def progress(self, pod: Manifest) -> Report:
        return self.direct.progress(pod)

    def departed(self, namespace: str, pod: str) -> tuple[str, Report] | None:
        said = self.stores.last_words.of(namespace, pod)
        return (said[0], parse_report(said[1])) if said is not None else None

    def gang(self, pod: Manifest) -> Gang | None:
        return self.direct.gang(pod)

    def order(self, pod: Manifest, job_uid: str, attempt: int, pacing: str | None = None) -> bool:
        return self._fence().order(pod, job_uid, attempt, pacing)

    def ask_checkpoint(self, pod: Manifest, job_uid: str, attempt: int, after_step: int) -> bool:
        return self._fence().ask_checkpoint(pod, job_uid, attempt, after_step)

    def write_status(self, namespace: str, name: str, resource_version: str, patch: Manifest) -> str:
        return self._fence().write_status(namespace, name, resource_version, patch)

    def create(self, namespace: str, manifests: Sequence[Manifest]) -> Created:
        return self._fence().create(namespace, manifests)

    def delete_pods(self, namespace: str, pods: Mapping[str, str], *, force: bool = False) -> None:
        self._fence().delete_pods(namespace, pods, force=force)

    def release_pods(self, namespace: str, pods: Mapping[str, str]) -> None:
        self._fence().release_pods(namespace, pods)

    def ungate(self, namespace: str, pods: Mapping[str, str]) -> None:
        self._fence().ungate(namespace, pods)

    def delete_job(self, namespace: str, name: str, uid: str, resource_version: str | None = None) -> None:
        self._fence().delete_job(namespace, name, uid, resource_version)

    def emit(self, job: Manifest, events: Sequence[Event]) -> None:
        direct = self._fence()
        kept, skipped = self.budget.admit(self.announced.fresh(job, events))
        for event in skipped:
            self.on_skipped(event)
        if kept:
            direct.emit(job, kept)


class CachedSweepCluster:
    """sweep.reconcile.SweepCluster reading the sweep and its trials' jobs from `stores`, writing through `direct`
    while `may_write`."""

    def __init__(self, direct: SweepCluster, stores: Stores, *, may_write: Callable[[], bool] = _always) -> None:
        self.direct, self.stores, self.may_write = direct, stores, may_write

    def _fence(self) -> SweepCluster:
        return _fenced(self.may_write, self.direct)

    def read_sweep(self, namespace: str, name: str) -> Manifest | None:
        return self.stores.sweeps.get(namespace, name)

    def list_trial_jobs(self, namespace: str, sweep: str) -> list[Manifest]:
        return self.stores.trials.of_job(namespace, sweep)

    def list_trial_jobs_in_part(self, namespace: str, sweep: str, whole: Collection[str]) -> list[Manifest]:
        return self.stores.trials.of_job(namespace, sweep, whole)

    def write_sweep_status(self, namespace: str, name: str, resource_version: str, patch: Manifest) -> str:
        return self._fence().write_sweep_status(namespace, name, resource_version, patch)

    def create_job(self, namespace: str, manifest: Manifest) -> str | None:
        return self._fence().create_job(namespace, manifest)

    def suspend_job(self, namespace: str, name: str) -> None:
        self._fence().suspend_job(namespace, name)

    def delete_job(self, namespace: str, name: str, uid: str) -> None:
        self._fence().delete_job(namespace, name, uid)


class FencedQueues:
    """Kueue Workloads read through `direct`, and written only while `may_write`, as every other write."""

    def __init__(self, direct: Queues, *, may_write: Callable[[], bool] = _always) -> None:
        self.direct, self.may_write = direct, may_write

    def read(self, namespace: str, job: str, uid: str) -> QueueState:
        return self.direct.read(namespace, job, uid)

    def apply(self, job: TrainingJob, action: WorkloadAction, now: datetime) -> None:
        _fenced(self.may_write, self.direct).apply(job, action, now)
