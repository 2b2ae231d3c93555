"""Operator settings, from TJ_OPERATOR_* environment variables; built once at startup and passed down."""

from typing import Literal, Self

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_TRAINER_IMAGE = "ghcr.io/trainingjob/trainer:0.1.0"


class OperatorSettings(BaseSettings):
    """How the operator runs; every field can be set as TJ_OPERATOR_<FIELD>."""

    model_config = SettingsConfigDict(env_prefix="TJ_OPERATOR_", use_attribute_docstrings=True)

    namespace: str = ""
    """Watch only this namespace; every namespace when empty."""
    metrics_port: int = Field(default=8080, ge=0, le=65535)
    """Port of the Prometheus /metrics endpoint; 0 turns it off."""
    backoff_base_seconds: float = Field(default=10.0, gt=0)
    """Delay before a restart; it doubles with each failure in a row that saved no newer checkpoint (a crash loop),
    and starts from this again after an attempt that did."""
    backoff_max_seconds: float = Field(default=300.0, gt=0)
    """The longest delay between attempts."""
    resync_seconds: float = Field(default=60.0, gt=0)
    """Reconcile every job at least this often, even when nothing changed."""
    workers: int = Field(default=8, ge=1, le=256)
    """Jobs reconciled at the same time."""
    batch_seconds: float = Field(default=0.05, gt=0, le=5)
    """After a job's first change, wait this long before reconciling it, so that a burst of pod events (a gang
    starting) makes one reconcile, not one per pod."""
    sweep_batch_seconds: float = Field(default=2.0, gt=0, le=300)
    """After a sweep's trial job (or the sweep) changes, wait this long before reconciling the sweep: every change
    within the window makes one reconcile, so a sweep of many trials reporting progress is reconciled at most once
    per window, not once per report."""
    max_writes_in_flight: int = Field(default=16, ge=1, le=256)
    """The most writes (pod creations, deletions, releases) in flight at once, across all jobs; when the apiserver
    answers 429 the operator halves its pace and waits as asked, then grows back."""
    read_progress: bool = True
    """Read rank 0's progress endpoint (pod IP, port 29400) for status.progress and progressDeadlineSeconds."""
    log_tail_lines: int = Field(default=20, ge=0, le=1000)
    """Lines of a failed pod's log kept in status.lastFailure."""
    terminating_timeout_seconds: float = Field(default=300.0, gt=0)
    """A pod still terminating this long after its grace period ended (its node unreachable) is force-deleted, once;
    one still there after that (a finalizer nobody removes) is waited for with words (the Created condition names
    it and its finalizers), and startupDeadlineSeconds counts the wait, so a restart is not held up for ever."""
    leader_election: bool = True
    """Act only while holding the Lease, so two operators (a second replica, a stray local run) never both act."""
    lease_name: str = "trainingjob-operator"
    """Name of the coordination.k8s.io Lease."""
    lease_namespace: str = ""
    """Namespace of the Lease: the operator's own (in a pod), else the watched namespace, else default."""
    lease_duration_seconds: float = Field(default=15.0, gt=0)
    """A standby takes over this long after the leader stopped renewing (at once when it shuts down cleanly)."""
    lease_renew_seconds: float = Field(default=2.0, gt=0)
    """How often the leader renews, and standbys retry."""
    network_policy: bool = True
    """Give each job a NetworkPolicy: only its own pods reach them, and the operator's namespace reaches the
    progress port. It bites only under a CNI that enforces NetworkPolicy. While the apiserver refuses a job's
    policy, the job's pods are not created (the Created condition says why)."""
    default_trainer_image: str = Field(default=DEFAULT_TRAINER_IMAGE, pattern=r"^[^\s]+$", max_length=512)
    """The image of a role that names none (spec.workers.image, spec.parameterServers.image). A job keeps the
    image it started with (status.defaultImage) when this changes."""
    in_place_restart: bool = True
    """When a DDP gang's trainer fails (or stalls) while every pod is healthy, restart it inside its pods: the
    launcher in each pod starts the next attempt, no pod is deleted or created; a parameter-server worker's trainer
    restarts alone inside its pod the same way. Off: every restart re-creates the gang's pods (or the worker's)."""
    in_place_timeout_seconds: float = Field(default=60.0, gt=0)
    """An in-place restart that has not brought every pod's trainer back this long after its backoff ended falls
    back to re-creating the pods, or the worker's pod (the restart is not counted twice)."""
    checkpoint_prior_mtbf_seconds: float = Field(default=21600.0, gt=0)
    """checkpoint.everySteps Auto: the mean time between failures assumed of a job before its first restart (plus
    the time it has run without one); from its first restart on, its own record counts: running seconds /
    restarts."""
    checkpoint_min_seconds: float = Field(default=1.0, gt=0)
    """checkpoint.everySteps Auto: the shortest interval between checkpoints (also the first one's, before a save
    was measured). Young/Daly reaches it only for saves that stall a few milliseconds and failures minutes apart
    (10 ms and one a minute: 1.1 s); a higher floor there costs half of itself in work redone per failure."""
    checkpoint_max_seconds: float = Field(default=3600.0, gt=0)
    """checkpoint.everySteps Auto: the longest interval between checkpoints."""
    completion_grace_seconds: float = Field(default=300.0, gt=0)
    """A DDP gang whose workers did not all finish together: how long the others may run on after the first one
    succeeded. Past it, a gang whose worker 0 succeeded has finished training (worker 0 records the result and the
    final checkpoint): the job succeeds and the others are stopped. One whose worker 0 runs on cannot finish (its
    collectives wait for a rank that is gone): the attempt is restarted from the newest checkpoint, as a stall."""
    resize_wait_seconds: float = Field(default=120.0, gt=0)
    """Elastic jobs (workers.minReplicas below replicas): how long a worker pod may stay unschedulable before the
    next attempt starts with the workers that fit, down to minReplicas (status.scale says since when it waits); a
    shrunk job also looks for room to grow back this often."""
    resize_interval_seconds: float = Field(default=600.0, gt=0)
    """Elastic jobs: the shortest time between a resize and the next growth back, so that capacity that comes and
    goes does not restart the job each time. A shrink is never held back: a job whose gang cannot be placed does
    not train at all."""
    key_file: str = ""
    """A file holding the operator's key (at least 16 bytes, surrounding whitespace such as a trailing newline left
    out): each job's key is derived from it and the job's UID, so the operator signs its orders to a job's agents
    without reading a Secret. Empty: a key drawn at start (a restarted operator then cannot sign for older jobs,
    whose in-place restarts fall back to new pods)."""
    log_format: Literal["text", "json"] = "text"
    """text: one line per decision for people; json: one object per line with job, attempt and decision."""

    @model_validator(mode="after")
    def _bounds_in_order(self) -> Self:
        if self.checkpoint_min_seconds > self.checkpoint_max_seconds:
            raise ValueError(
                f"checkpoint_min_seconds ({self.checkpoint_min_seconds}) must not exceed checkpoint_max_seconds"
                f" ({self.checkpoint_max_seconds})"
            )
        return self
