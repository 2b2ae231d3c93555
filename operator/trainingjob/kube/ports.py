"""The ports reconcile needs from a cluster, and their errors: Cluster for a job's reconcile (and Queues for a
queued job's Kueue Workload), SweepCluster for a sweep's. Implemented on the apiserver (kube.job_cluster,
kube.kueue, kube.sweep_cluster), from the runtime's stores (runtime.cached), on this machine (local.cluster,
local.sweep) and in memory by the tests (tests/support/fake_cluster.py). Pure: no client."""

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from trainingjob.children.agent import Gang
from trainingjob.children.progress_report import Report
from trainingjob.children.workload import QueueState, WorkloadAction
from trainingjob.model import TrainingJob
from trainingjob.plan import Event
from trainingjob.plan.waves import Refusal

Manifest = dict[str, Any]


class Conflict(Exception):  # noqa: N818  (a domain outcome, not a bug)
    """The job changed since it was read: plan again from the new version."""


class Gone(Exception):  # noqa: N818
    """The job no longer exists."""


@dataclass(frozen=True)
class Created:
    """What a create call did: the pods it created (name -> UID) and the ones the apiserver refused."""

    pods: Mapping[str, str] = field(default_factory=dict)
    refusals: Sequence[Refusal] = ()


class Cluster(Protocol):
    """What reconcile needs from a cluster. write_status raises Conflict or Gone and returns the new version."""

    def read_job(self, namespace: str, name: str) -> Manifest | None: ...
    def list_pods(self, namespace: str, job: str) -> list[Manifest]: ...
    def read_service(self, namespace: str, job: str) -> Manifest | None: ...
    def log_tail(self, namespace: str, pod: str, lines: int) -> str: ...
    def progress(self, pod: Manifest) -> Report: ...
    # (UID, last words) of the pod of that name seen deleted a moment ago (runtime/last_words.py), else None
    def departed(self, namespace: str, pod: str) -> tuple[str, Report] | None: ...
    def gang(self, pod: Manifest) -> Gang | None: ...  # rank 0's agent's account, None when it does not answer
    # rank 0's agent: run `attempt` (its trainer with TJ_CHECKPOINT_PACING `pacing`, when given)
    def order(self, pod: Manifest, job_uid: str, attempt: int, pacing: str | None = None) -> bool: ...
    # rank 0's agent: the running `attempt` saves a checkpoint newer than `after_step` (an elastic job's growth)
    def ask_checkpoint(self, pod: Manifest, job_uid: str, attempt: int, after_step: int) -> bool: ...
    def write_status(self, namespace: str, name: str, resource_version: str, patch: Manifest) -> str: ...
    def create(self, namespace: str, manifests: Sequence[Manifest]) -> Created: ...
    # pods: name -> the UID each was observed with (a namesake created since is not touched)
    def delete_pods(self, namespace: str, pods: Mapping[str, str], *, force: bool = False) -> None: ...
    # pods: name -> UID observed; each loses the tracking finalizer (a namesake, or a pod gone already, is left)
    def release_pods(self, namespace: str, pods: Mapping[str, str]) -> None: ...
    # an earlier operator's pods at the tracking gate: name -> UID observed (a namesake created since stays gated)
    def ungate(self, namespace: str, pods: Mapping[str, str]) -> None: ...
    # only the job of this UID, and of this resourceVersion when given (else it is left for the next pass)
    def delete_job(self, namespace: str, name: str, uid: str, resource_version: str | None = None) -> None: ...
    def emit(self, job: Manifest, events: Sequence[Event]) -> None: ...


class Room(Protocol):
    """Room on the nodes for more of a shrunk elastic job's workers (kube/room.py)."""

    def spare(self, pod: Manifest, at_most: int) -> int: ...


class Queues(Protocol):
    """A queued job's Kueue Workload (kube/kueue.py): read once per reconcile, and the one write the plan asks."""

    def read(self, namespace: str, job: str, uid: str) -> QueueState: ...
    def apply(self, job: TrainingJob, action: WorkloadAction, now: datetime) -> None: ...


@runtime_checkable
class TrialJobsInPart(Protocol):
    """A SweepCluster that can list a sweep's trials' jobs whole only where asked (runtime.cached, from the stores):
    the others as their metadata alone (name, namespace, uid, version, the controlling owner, creation and
    deletion times), which is all a sweep reads of a finished trial's job; a sweep of thousands of trials then
    unpacks only its few unfinished ones."""

    def list_trial_jobs_in_part(self, namespace: str, sweep: str, whole: Collection[str]) -> list[Manifest]: ...


class SweepCluster(Protocol):
    """What a sweep's reconcile needs. write_sweep_status raises reconcile.Conflict or Gone; create_job takes an
    existing job of that name as done when the sweep controls it, and answers the apiserver's refusal in words
    (None when created; sweep.creation.NAME_TAKEN_ANSWER when the job there is not the sweep's);
    suspend_job and delete_job take a missing one as done; delete_job deletes only the job of that UID."""

    def read_sweep(self, namespace: str, name: str) -> Manifest | None: ...
    def list_trial_jobs(self, namespace: str, sweep: str) -> list[Manifest]: ...
    def write_sweep_status(self, namespace: str, name: str, resource_version: str, patch: Manifest) -> str: ...
    def create_job(self, namespace: str, manifest: Manifest) -> str | None: ...
    def suspend_job(self, namespace: str, name: str) -> None: ...
    def delete_job(self, namespace: str, name: str, uid: str) -> None: ...
