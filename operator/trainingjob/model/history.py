"""status.history: what happened to the job, kept small. Every attempt and how it ended, the pod failures, the
checkpoints, and the loss and evaluation curves thinned to a fixed number of points spread over the whole run.
The dashboard and `tjctl timeline` draw it; the operator writes it from status transitions (plan/history.py)."""

from datetime import datetime
from enum import StrEnum
from typing import Annotated

from pydantic import Field

from trainingjob.model.base import ApiModel, Float, Int, Str
from trainingjob.model.values import CheckpointStatus, Consequences, Count, FailureClass, Metrics, PodReason, Reason

MAX_ATTEMPTS = 32
MAX_FAILURES = 32
MAX_CHECKPOINTS = 32
MAX_POINTS = 128
MAX_EVALUATIONS = 64
MAX_REFUSALS = 32
PodName = Annotated[Str, Field(max_length=253)]


class AttemptOutcome(StrEnum):
    SUCCEEDED = "Succeeded"  # every worker finished
    FAILED = "Failed"  # a pod failure or a deadline ended it: the job restarted or failed
    SUSPENDED = "Suspended"  # the job was suspended; resuming starts the next attempt
    REPLACED = "Replaced"  # a new attempt began for another reason (the job's spec changed, pods vanished)


class AttemptRecord(ApiModel):
    """One attempt: a gang of pods started together, from when it began to how it ended."""

    attempt: Annotated[Int, Field(ge=1)]
    """The attempt's number (status.attempt while it ran)."""
    start_time: datetime
    """When the attempt began: the job started, restarted or was resumed (backoff included after it)."""
    pods_time: datetime | None = None
    """When its first pods were created (after the backoff), or first seen."""
    running_time: datetime | None = None
    """When all its ranks first ran (the job's phase became Running)."""
    end_time: datetime | None = None
    """When it ended; unset while it runs."""
    outcome: AttemptOutcome | None = None
    """Succeeded, Failed, Suspended or Replaced; unset while it runs."""
    reason: Reason | None = None
    """Why it ended: the failure class, or the reason of the Failed condition."""
    resumed_from_step: Count | None = None
    """Where it resumed from: the step its trainer reported it resumed from, else the newest checkpoint's when it
    began."""
    in_place: bool | None = None
    """True when it began inside the previous attempt's pods (restarted in place, no pod created); unset when it
    got pods of its own."""
    first_step_time: datetime | None = None
    """When its rank 0 finished its first training step, as it reported (on the operator's clock): its training
    time is counted from here. Unset until then, or when the trainer does not say."""
    last_step: Count | None = None
    """status.progress.step at its last report: how far the job had got (the furthest step, so an attempt that
    resumed behind it reads it until it passes it)."""
    last_heartbeat_time: datetime | None = None
    """When its rank 0 last reported: the training of an attempt that failed is counted until here."""
    checkpoint_stall_seconds: Annotated[Float, Field(ge=0)] | None = None
    """Seconds its checkpoint saves held training up, as its rank 0 last reported."""
    workers: Count | None = None
    """How many workers it ran with (status.scale.current as it last read), when fewer than the job asked for (an
    elastic job shrunk); unset at full size."""
    desired_workers: Count | None = None
    """How many the job asked for then (status.scale.desired), beside `workers`."""


class FailureRecord(ApiModel):
    """A pod failure the operator counted (the whole of status.lastFailure but the log tail)."""

    time: datetime
    """When the failure was observed."""
    attempt: Annotated[Int, Field(ge=1)]
    """The attempt the pod belonged to."""
    pod: PodName
    """The failed pod's name."""
    failure_class: FailureClass
    """Retryable, Permanent, OOMKilled, Disruption, Stalled or DeadlineExceeded."""
    exit_code: Annotated[Int, Field(ge=-1, le=255)] | None = None
    """The trainer container's exit code, when it exited."""
    reason: PodReason = ""
    """The reason Kubernetes or the operator gave, e.g. OOMKilled, Evicted."""
    consequences: Consequences = ""
    """The other ranks that failed because of it (e.g. "worker-0 exited 75 because a peer was lost")."""


class RefusalRecord(ApiModel):
    """A stretch of node refusals of one pod (status.replacements[].refused, kept once it is over): the nodes'
    kubelets would not admit the pod, so it was created again alone, `count` times (no failure was counted)."""

    pod: PodName
    """The refused pod's name (its re-creations have the same name)."""
    attempt: Annotated[Int, Field(ge=1)]
    """The attempt the pod belonged to."""
    since: datetime
    """When a node first refused it in this stretch."""
    time: datetime
    """When the operator last noted a refusal of the stretch."""
    count: Annotated[Int, Field(ge=1)] = 1
    """Refusals in the stretch."""
    node: Annotated[Str, Field(max_length=253)] = ""
    """The node that refused it last."""
    reason: PodReason = ""
    """The kubelet's reason the last time, e.g. OutOfnvidia.com/gpu."""


class MetricPoint(ApiModel):
    """Rank 0's progress at a step: the training curve."""

    step: Count
    """The training step."""
    time: datetime
    """When the operator read it."""
    loss: Float | None = None
    """The training loss rank 0 reported."""
    samples_per_second: Annotated[Float, Field(ge=0)] | None = None
    """The job's throughput then."""


class EvaluationPoint(ApiModel):
    """An evaluation's metrics at a step."""

    step: Count
    """The step the evaluation was made at."""
    time: datetime
    """When the operator read it."""
    metrics: Metrics
    """The evaluation's metrics, e.g. {"accuracy": 0.97}."""


Seconds = Annotated[Float, Field(ge=0)]


class EarlierAttempts(ApiModel):
    """The attempts no longer in the list, kept as the goodput split counted them, so status.goodput stays whole:
    their seconds by part, and what the split of the attempts after them needs to know."""

    attempts: Count
    """How many attempts were dropped from the list."""
    start: datetime
    """Where the job's time axis began (its creation)."""
    until: datetime
    """How far along the axis they account for: the last one's last step, or its end."""
    queued_seconds: Seconds = 0.0
    """Their queued seconds (as status.goodput's, before rounding)."""
    startup_seconds: Seconds = 0.0
    """Their startup seconds."""
    productive_seconds: Seconds = 0.0
    """Their productive seconds."""
    checkpoint_stall_seconds: Seconds = 0.0
    """Their checkpoint stall seconds."""
    recovery_seconds: Seconds = 0.0
    """Their recovery seconds."""
    redone_seconds: Seconds = 0.0
    """Their redone seconds."""
    shrunk_seconds: Seconds = 0.0
    """Their shrunk seconds."""
    suspended_seconds: Seconds = 0.0
    """Their suspended seconds."""
    had_pods: bool = False
    """Whether any of them had pods: a later wait is recovery, not queueing."""
    high_water_step: Count = 0
    """The furthest step they reached: a later attempt that resumed behind it redoes steps."""
    suspended_since: datetime | None = None
    """When the last of them was suspended, if it was: the time until the next attempt began is suspended."""


class History(ApiModel):
    """The job's history. Lists keep their newest entries; curves keep at most MAX_POINTS points at least
    `pointEverySteps` apart, doubling that spacing whenever they fill, so they always span the whole run."""

    attempts: Annotated[list[AttemptRecord], Field(max_length=MAX_ATTEMPTS)] = Field(default_factory=list)
    """The newest attempts, oldest first; the last one is the current attempt."""
    failures: Annotated[list[FailureRecord], Field(max_length=MAX_FAILURES)] = Field(default_factory=list)
    """The newest pod failures, oldest first."""
    refusals: Annotated[list[RefusalRecord], Field(max_length=MAX_REFUSALS)] = Field(default_factory=list)
    """The newest stretches of node refusals of a pod (not failures: the pod never started), oldest first."""
    checkpoints: Annotated[list[CheckpointStatus], Field(max_length=MAX_CHECKPOINTS)] = Field(default_factory=list)
    """The newest checkpoints the trainer reported, oldest first."""
    points: Annotated[list[MetricPoint], Field(max_length=MAX_POINTS)] = Field(default_factory=list)
    """Loss and throughput by step, oldest first."""
    point_every_steps: Annotated[Int, Field(ge=1)] = 1
    """The least number of steps between two points."""
    evaluations: Annotated[list[EvaluationPoint], Field(max_length=MAX_EVALUATIONS)] = Field(default_factory=list)
    """Evaluation metrics by step, oldest first."""
    evaluation_every_steps: Annotated[Int, Field(ge=1)] = 1
    """The least number of steps between two evaluations kept."""
    earlier: EarlierAttempts | None = None
    """The attempts dropped from `attempts` (past MAX_ATTEMPTS), summed for the goodput split."""
