"""The planner's vocabulary: its inputs (a Context), one policy's frozen Decision, and the Plan they fold into."""

from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from trainingjob.children.naming import Replica
from trainingjob.children.observe import Observed, PodState
from trainingjob.children.specs import replicas
from trainingjob.children.workload import WorkloadAction
from trainingjob.model import TrainingJob, TrainingJobStatus
from trainingjob.settings import OperatorSettings

Manifest = dict[str, Any]


@dataclass(frozen=True)
class Event:
    """A Kubernetes Event about the job."""

    type: str  # Normal or Warning
    reason: str
    message: str


@dataclass(frozen=True)
class Refusal:
    """The apiserver's answer to one refused create: of a pod, or of the Service, key Secret or NetworkPolicy the
    job's pods need (`kind`)."""

    name: str
    code: int
    message: str
    kind: str = "Pod"


def _default(name: str) -> Any:
    """The operator's own default for a setting (OperatorSettings is the one place defaults are written)."""
    return OperatorSettings.model_fields[name].default


@dataclass(frozen=True)
class Settings:
    """Operator-wide knobs the planner needs (meanings in trainingjob.settings.OperatorSettings)."""

    backoff_base_seconds: float = _default("backoff_base_seconds")
    backoff_max_seconds: float = _default("backoff_max_seconds")
    terminating_timeout_seconds: float = _default("terminating_timeout_seconds")
    read_progress: bool = _default("read_progress")
    network_policy: bool = _default("network_policy")
    operator_namespace: str = ""  # where the operator runs, when in a pod: its progress reads are admitted
    default_trainer_image: str = _default("default_trainer_image")
    in_place_restart: bool = _default("in_place_restart")
    in_place_timeout_seconds: float = _default("in_place_timeout_seconds")
    checkpoint_prior_mtbf_seconds: float = _default("checkpoint_prior_mtbf_seconds")
    checkpoint_min_seconds: float = _default("checkpoint_min_seconds")
    checkpoint_max_seconds: float = _default("checkpoint_max_seconds")
    completion_grace_seconds: float = _default("completion_grace_seconds")
    resize_wait_seconds: float = _default("resize_wait_seconds")
    resize_interval_seconds: float = _default("resize_interval_seconds")


@dataclass(frozen=True)
class Context:
    """What every policy sees: the job, its observed children, the clock and the settings. Read-only."""

    job: TrainingJob
    observed: Observed
    now: datetime
    settings: Settings
    # What a policy computed from this context and a status that later policies may ask again (plan/slots.py):
    # every policy of a pass sees the same context, so a large gang's slots are laid out once, not once a policy.
    memo: dict[Any, Any] = field(default_factory=dict, init=False, compare=False, repr=False)

    @property
    def name(self) -> str:
        return str(self.job.metadata.name)

    @property
    def uid(self) -> str:
        return str(getattr(self.job.metadata, "uid", "") or "")

    @property
    def generation(self) -> int | None:
        return self.job.metadata.generation

    @cached_property
    def slots(self) -> list[Replica]:
        return replicas(self.job)

    def pods_of(self, attempt: int) -> list[PodState]:
        return self.observed.of_attempt(attempt)

    def stale(self, attempt: int) -> list[PodState]:
        return self.observed.not_of_attempt(attempt)


@dataclass(frozen=True)
class Decision:
    """One policy's verdict: the status it leaves and what it asks to be done. `final` stops later policies."""

    status: TrainingJobStatus
    delete: tuple[str, ...] = ()
    force_delete: tuple[str, ...] = ()
    create: tuple[Replica, ...] = ()
    create_service: bool = False
    ungate: tuple[str, ...] = ()  # an earlier operator's pods to release from the tracking gate, once the status
    # naming them is written
    events: tuple[Event, ...] = ()
    requeue_after: float | None = None
    delete_job: bool = False
    order_attempt: int | None = None  # tell rank 0's agent to run this attempt in the gang's pods (in place)
    order_workers: tuple[tuple[str, int], ...] = ()  # (pod, incarnation): a PS worker's agent restarts in place
    ask_checkpoint: int | None = None  # ask rank 0's agent for a checkpoint of this attempt newer than this step
    creates_all: bool = False  # `create` is every pod the attempt misses: once created, the attempt has them all
    final: bool = False


@dataclass(frozen=True)
class Plan:
    """What one reconcile does: write `status` first, emit `events`, then delete, let go of pods (their tracking
    finalizer), release gates, create."""

    status: TrainingJobStatus
    create: tuple[Manifest, ...] = ()
    delete: tuple[str, ...] = ()
    force_delete: tuple[str, ...] = ()
    ungate: tuple[str, ...] = ()
    release: tuple[str, ...] = ()  # after the deletes: the pods whose tracking finalizer goes (plan/release.py)
    events: tuple[Event, ...] = ()
    requeue_after: float | None = None
    delete_job: bool = False
    order_attempt: int | None = None  # after the status is written: rank 0's agent runs this attempt (in place)
    order_workers: tuple[tuple[str, int], ...] = ()  # after the status is written: (pod, incarnation) to run
    pacing: str | None = None  # the trainer's TJ_CHECKPOINT_PACING: in the new pods, and in an order to run in place
    ask_checkpoint: int | None = None  # after the status is written: rank 0 saves a checkpoint newer than this step
    decisions: tuple[str, ...] = field(default=())  # the policies that decided something, in order, for logs
    workload: WorkloadAction | None = None  # the one write on a queued job's Kueue Workload (plan/queue.py)
    # The Created condition's message once every pod in `create` is created: they are all the attempt misses, and
    # the record of the waves (plan/waves.py) says so at once, not the next pass.
    all_created: str | None = None
