"""The TrainingJob status: phase, conditions, replica counts, restarts, failures, checkpoint, progress and
result."""

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from trainingjob.model import tracked
from trainingjob.model.base import LIST_ATOMIC, ApiModel, Bool, Float, Int, Str, list_map, unique_by
from trainingjob.model.history import History
from trainingjob.model.tracked import MAX_RANGES, MAX_TRACKED, PodOutcome, TrackedPod, TrackedPodRange
from trainingjob.model.values import (
    MAX_METRICS,
    METRIC_NAME,
    CheckpointStatus,
    Consequences,
    Count,
    FailureClass,
    Message,
    Metrics,
    Percent,
    PodReason,
    Reason,
)

MAX_CLEARED = 64  # checkpoint folders a sweep's trial is told to remove (and reports gone) at most
# A sweep trial's checkpoint folder under the checkpoint path: <job name>/<job uid>.
CHECKPOINT_FOLDER = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?/[A-Za-z0-9][-A-Za-z0-9]{0,63}$"
CheckpointFolder = Annotated[Str, Field(pattern=CHECKPOINT_FOLDER, max_length=128)]

__all__ = ["MAX_METRICS", "METRIC_NAME", "CheckpointStatus", "FailureClass", "History", "PodOutcome", "TrackedPod"]


class Phase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    SUSPENDED = "Suspended"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"

    @property
    def is_terminal(self) -> bool:
        """Succeeded and Failed are final: nothing moves a job out of them."""
        return self in (Phase.SUCCEEDED, Phase.FAILED)


class ConditionType(StrEnum):
    CREATED = "Created"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    SUSPENDED = "Suspended"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    PREPARED = "Prepared"
    QUEUED = "Queued"  # true while Kueue holds the job, or another controller's scheduling gate holds a pod


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(ApiModel):
    """A Kubernetes-style condition: one aspect of the job's state and when it last changed."""

    type: ConditionType
    """Created, Running, Restarting, Suspended, Succeeded, Failed, Prepared (the objects the job's pods need, its
    Service, key Secret and NetworkPolicy, exist; False names the one the apiserver refuses) or Queued (a job with
    scheduling.queueName: true while Kueue holds it, naming the LocalQueue and why; any job: true while another
    controller's scheduling gate holds one of its pods, a wait the startup deadline does not count)."""
    status: ConditionStatus
    """True, False or Unknown."""
    reason: Reason
    """Why the condition is in its status, CamelCase, e.g. AllWorkersRunning or WorkerFailed."""
    message: Message = ""
    """What happened, as a sentence for people."""
    last_transition_time: datetime
    """When status last changed."""
    last_probe_time: datetime | None = None
    """When the operator last checked it, where that matters (the last refused creation)."""
    observed_generation: Annotated[Int, Field(ge=0)] | None = None
    """The metadata.generation the condition was computed from."""


class ReplicaStatus(ApiModel):
    """Pod counts of one role in the current attempt."""

    active: Count = 0
    """Pods created and not finished."""
    ready: Count = 0
    """Pods running with all containers ready."""
    succeeded: Count = 0
    """Pods that exited 0."""
    failed: Count = 0
    """Pods that failed."""


class RestartCounts(ApiModel):
    """Restarts so far, per failure class; only retryable ones count against backoffLimit."""

    retryable: Count = 0
    """Restarts after a retryable exit code."""
    oom: Count = 0
    """Restarts after an OOM kill."""
    disruption: Count = 0
    """Restarts after preemption, eviction, node drain or node loss; they count against disruptionLimit only. A pod
    a node refused to admit is not one: it is created again alone, under the startup deadline."""
    stalled: Count = 0
    """Restarts after no progress for progressDeadlineSeconds."""

    @property
    def total(self) -> int:
        """Restarts of every kind."""
        return self.retryable + self.oom + self.disruption + self.stalled


class LastFailure(ApiModel):
    """Evidence of the last failed pod, kept after the pod is gone."""

    pod: Annotated[Str, Field(max_length=253)]
    """Name of the pod that failed."""
    pod_uid: Annotated[Str, Field(max_length=64)] | None = None
    """UID of the pod that failed, so a failure is counted once even when its pod is seen again."""
    attempt: Annotated[Int, Field(ge=1)]
    """The attempt it belonged to."""
    failure_class: FailureClass
    """How the failure was classified, which decides whether and how the job restarts."""
    exit_code: Annotated[Int, Field(ge=-1, le=255)] | None = None
    """Exit code of the trainer container, when it exited."""
    reason: PodReason
    """Why it failed, as the kubelet reported it (e.g. Error, OOMKilled, Evicted, OutOfnvidia.com/gpu) or
    the operator's own word (Vanished, Stalled)."""
    message: Message = ""
    """What happened, as a sentence for people."""
    log_tail: Annotated[Str, Field(max_length=16384)] = ""
    """The last lines of the container's log."""
    consequences: Consequences = ""
    """The other ranks that failed with it, as consequences of this one, the root cause (e.g. "worker-0 exited 75
    because a peer was lost"); empty when it failed alone."""
    time: datetime
    """When the failure was observed."""


PacingSeconds = Annotated[Float, Field(ge=0)]


class CheckpointPacing(ApiModel):
    """How often this attempt checkpoints, and why, from rank 0's report. With checkpoint.everySteps Auto the
    interval follows Young/Daly, sqrt(2 x saveSeconds x mtbfSeconds), within the operator's bounds; with a fixed
    interval, optimalSeconds says what Auto would choose."""

    auto: Bool
    """Whether the interval follows the failure rate (everySteps: Auto)."""
    interval_seconds: PacingSeconds | None = None
    """The interval in force; absent when a fixed everySteps alone sets it."""
    optimal_seconds: PacingSeconds | None = None
    """Young/Daly's interval within the operator's bounds; absent until a save was measured."""
    save_seconds: PacingSeconds | None = None
    """What one checkpoint save held training up, on average so far this attempt."""
    mtbf_seconds: PacingSeconds | None = None
    """The job's mean time between failures as the trainer estimates it now: its running seconds / its restarts,
    or, before its first restart, the operator's prior + its running seconds."""
    bound: Literal["min", "max"] | None = None
    """The operator's bound (checkpointMinSeconds or checkpointMaxSeconds) that holds the interval, if any."""
    reason: Annotated[Str, Field(max_length=512)] = ""
    """The interval and why, as a sentence for people."""


class Progress(ApiModel):
    """The trainer's last progress report (from rank 0)."""

    step: Count = 0
    """Steps completed."""
    loss: Float | None = None
    """Training loss at the last step."""
    samples_per_second: Annotated[Float, Field(ge=0)] | None = None
    """Throughput of the whole job."""
    last_heartbeat_time: datetime | None = None
    """When the trainer last reported, on its node's clock (which may be off: see lastChangeTime)."""
    last_change_time: datetime | None = None
    """When the operator last saw rank 0's report change (a new step, heartbeat or attempt), on the operator's own
    clock, as a Lease's renewals are judged: progressDeadlineSeconds is measured from it, so a node whose clock is
    behind or ahead neither stalls a healthy job nor keeps a silent one alive."""
    attempt: Annotated[Int, Field(ge=0)] | None = None
    """The attempt whose rank 0 made this report; progressDeadlineSeconds applies only once the current
    attempt has reported."""
    total_steps: Count | None = None
    """The steps the whole run takes, as the trainer reported them."""
    percent: Percent | None = None
    """Whole percent of totalSteps completed (rounded down), computed by the operator."""
    estimated_completion_time: datetime | None = None
    """When the trainer expects to finish its last step: lastHeartbeatTime plus the time it then estimated was
    left. Absent once the job is suspended or finished."""
    metrics: Metrics | None = None
    """The latest evaluation metrics the trainer reported, by name (at most 16)."""
    metrics_step: Count | None = None
    """The step the metrics were computed at."""
    resumed_from_step: Count | None = None
    """The step this attempt's trainer resumed from (its checkpoint's; 0 for a fresh start), as it reported."""
    first_step_time: datetime | None = None
    """When rank 0 of this attempt finished its first training step, as it reported; the attempt's training time
    (status.goodput) is counted from it."""
    checkpoint_stall_seconds: Annotated[Float, Field(ge=0)] | None = None
    """Seconds this attempt's checkpoint saves have held training up so far, as rank 0 reported."""
    checkpoint_pacing: CheckpointPacing | None = None
    """How often this attempt checkpoints and why (jobs with a checkpoint volume)."""
    checkpoints_cleared: Annotated[list[CheckpointFolder], Field(max_length=MAX_CLEARED)] | None = None
    """A sweep's trial: the folders of earlier trials (<job name>/<job uid>, under the checkpoint path) its rank 0
    was told to remove (the trainingjob.io/remove-checkpoints annotation) and found gone once it had removed them."""
    finished: Bool | None = None
    """True once rank 0 of this attempt said it has finished training (a parameter-server worker 0 may then wait,
    silent, for slower workers): progressDeadlineSeconds no longer applies to the attempt."""


class Goodput(ApiModel):
    """Where the job's wall time went, in whole seconds that add up to wallSeconds, and how much of it was
    productive training. The operator refreshes it as it writes the status (at least once a minute while the job
    runs); `time` says as of when."""

    ratio: Annotated[Float, Field(ge=0, le=1)] | None = None
    """Goodput: productiveSeconds / (wallSeconds - suspendedSeconds), to 3 decimals. Absent before any time counts,
    and while no progress report of the job was read (its training time is then unknown)."""
    wall_seconds: Count = 0
    """From the job's creation to its completion (or to `time`): the sum of the parts below."""
    queued_seconds: Count = 0
    """From the job's creation until its first attempt's pods were created (suspended by a queue such as Kueue
    included)."""
    startup_seconds: Count = 0
    """The first attempt with pods: from its pods until its first training step (scheduling, image pulls,
    rendezvous, loading)."""
    productive_seconds: Count = 0
    """Training, from each attempt's first step to its last, less the checkpoint stall, the redone work and the
    missing workers' share."""
    checkpoint_stall_seconds: Count = 0
    """Training held up by checkpoint saves, as rank 0 of each attempt reported."""
    recovery_seconds: Count = 0
    """From each attempt's last step to the next one's first: the failure noticed, the backoff, pods created or the
    trainers restarted in place, rendezvous, the checkpoint loaded."""
    redone_seconds: Count = 0
    """Training after a resume that redid steps an earlier attempt had made: the steps lost times the step time."""
    shrunk_seconds: Count = 0
    """Training with fewer workers than the job asked for (an elastic job shrunk): the missing workers' share of
    it (half the training at 2 of 4 workers), taking progress to scale with the workers."""
    suspended_seconds: Count = 0
    """From each suspension until the job was resumed (a suspension before the first pods counts as queued)."""
    time: datetime
    """When it was computed: a running job's parts grow until it is computed again."""


class TrainingResult(ApiModel):
    """What a Succeeded job ended with, to compare runs by: written once, as it succeeds."""

    step: Count | None = None
    """Steps completed, as the trainer last reported."""
    total_steps: Count | None = None
    """The steps the run was to take."""
    loss: Float | None = None
    """Training loss at the last reported step."""
    metrics: Metrics | None = None
    """The final evaluation metrics, by name."""
    metrics_step: Count | None = None
    """The step the metrics were computed at."""
    duration_seconds: Count | None = None
    """Seconds from startTime to completionTime, time spent suspended left out."""
    checkpoint: CheckpointStatus | None = None
    """The newest complete checkpoint when the job succeeded."""
    goodput: Goodput | None = None
    """Where its time went, and its goodput, as it succeeded."""


class NodeRefusal(ApiModel):
    """A slot whose pods nodes' kubelets refused to admit (OutOfnvidia.com/gpu, UnexpectedAdmissionError), in a
    stretch without a pod of the slot running since: a pod that never started, so the startup deadline counts
    from the first refusal, across the pod's re-creations. Cleared once a pod of the slot runs."""

    since: datetime
    """When a node first refused the slot's pod in this stretch."""
    count: Annotated[Int, Field(ge=1)] = 1
    """Refusals in this stretch: each doubles the delay before the pod is created again."""
    node: Annotated[Str, Field(max_length=253)] = ""
    """The node that refused it last."""
    reason: PodReason = ""
    """The kubelet's reason the last time, e.g. OutOfnvidia.com/gpu."""


class SlotBackoff(ApiModel):
    """A slot whose pod is re-created alone in the current attempt, with a backoff of its own: a parameter-server
    worker replaced alone, or any pod a node refused to admit. One slot's failure never delays another's
    replacement."""

    pod: Annotated[Str, Field(max_length=253)]
    """The slot's pod name (its replacements have the same name)."""
    not_before: datetime
    """The earliest moment its replacement is created."""
    failures: Count = 0
    """Its failures in this attempt that were the job's own (retryable, OOM): each doubles its delay; disruptions
    (preemption, eviction, node loss) do not."""
    refused: NodeRefusal | None = None
    """While nodes refuse the slot's pod (and none of its pods has run since): since when, how often, and the
    last node and reason."""


class InPlaceRestart(ApiModel):
    """A restart in place under way: the operator recorded it and tells rank 0's agent to run the attempt until
    every pod's agent runs it, or re-creates the pods if they do not within the operator's inPlaceTimeoutSeconds."""

    attempt: Annotated[Int, Field(ge=1)]
    """The attempt the gang restarts as."""
    time: datetime
    """When the restart was recorded; the agents are told once the backoff after it is over."""


class WorkerScale(ApiModel):
    """How many workers the job runs with against spec.workers.replicas, and why fewer: an elastic job
    (workers.minReplicas) may train on fewer when capacity is lost and grows back when it returns."""

    current: Count
    """Worker pods the current attempt runs with."""
    desired: Count
    """spec.workers.replicas."""
    workers: Annotated[Str, Field(max_length=16)]
    """current/desired, e.g. 2/4: kubectl get's WORKERS column."""
    reason: Reason
    """Why the job runs with this many, CamelCase: AllWorkers, WaitingForCapacity, CapacityLost, BelowMinReplicas,
    ResizeRateLimited, CapacityReturned or NotElastic."""
    message: Message = ""
    """The same as a sentence for people."""
    since: datetime
    """When the job came to `current` workers."""
    last_resize_time: datetime | None = None
    """When the job last shrank or grew: the next growth waits the operator's resize interval from it."""
    grow_after_step: Count | None = None
    """Set while the job waits to grow: room for more workers was seen when the newest checkpoint was this step; the
    job grows once a newer checkpoint is reported (a restart, not mid-step)."""


class TrainingJobStatus(ApiModel):
    """The observed state of the job, written by the operator."""

    phase: Phase = Phase.PENDING
    """Pending, Running, Restarting, Suspended, Succeeded or Failed; the last two are final."""
    conditions: Annotated[list[Condition], Field(max_length=16), AfterValidator(unique_by("type"))] = Field(
        default_factory=list, json_schema_extra=list_map("type")
    )
    """Created, Running, Restarting, Suspended, Succeeded, Failed and Prepared, with reasons."""
    observed_generation: Annotated[Int, Field(ge=0)] | None = None
    """The metadata.generation this status was computed from."""
    workers: ReplicaStatus = Field(default_factory=ReplicaStatus)
    """Worker pod counts of the current attempt."""
    parameter_servers: ReplicaStatus | None = None
    """Parameter-server pod counts of the current attempt (ParameterServer mode)."""
    attempt: Count = 0
    """The current attempt: 0 before the first pods, 1 for the first attempt, N+1 after N whole-job
    restarts."""
    pods_attempt: Annotated[Int, Field(ge=1)] | None = None
    """The attempt the current pods were created for, when later attempts restarted inside them (in place); unset
    while the pods are the current attempt's own. Pod names and the trainingjob.io/attempt label carry it."""
    in_place_restart: InPlaceRestart | None = None
    """The restart in place under way, until every pod's agent runs the new attempt."""
    scale: WorkerScale | None = None
    """How many workers the job runs with, out of spec.workers.replicas, why, and since when: written for an elastic
    DDP job (workers.minReplicas below replicas)."""
    restarts: RestartCounts = Field(default_factory=RestartCounts)
    """Restarts so far, per failure class."""
    in_place_restarts: Count = 0
    """How many of the restarts went in place: every rank's trainer started again inside the pods it ran in, no
    pod deleted or created (the others re-created the gang's pods)."""
    last_failure: LastFailure | None = None
    """The last failed pod: which one, its exit code, reason and last log lines."""
    last_checkpoint: CheckpointStatus | None = None
    """The newest complete checkpoint."""
    progress: Progress | None = None
    """The trainer's last progress report."""
    result: TrainingResult | None = None
    """What the job ended with: set when it succeeds."""
    goodput: Goodput | None = None
    """Where the job's time went (queued, startup, productive, checkpoint stall, recovery, redone, shrunk,
    suspended) and its goodput: the share of its time, suspended time left out, spent in productive training."""
    start_time: datetime | None = None
    """When the job's first attempt began (its pods were first created)."""
    default_image: Annotated[Str, Field(max_length=512)] | None = None
    """The image of every role that names none: the operator's default trainer image when the job first
    created pods, kept so that restarts run the image the job started with even after the operator's setting
    changed."""
    suspended_seconds: Count = 0
    """Seconds the job has spent suspended since it started; activeDeadlineSeconds does not count them."""
    completion_time: datetime | None = None
    """When the job reached Succeeded or Failed."""
    history: History | None = None
    """What happened so far: attempts, pod failures, checkpoints, and the loss and evaluation curves."""
    tracked_pods: Annotated[list[TrackedPod], Field(max_length=MAX_TRACKED), AfterValidator(tracked.check_unique)] = (
        Field(default_factory=list, json_schema_extra=LIST_ATOMIC)
    )
    """Bookkeeping: the pods of the current attempt (see TrackedPod); those with no more to say than that they run
    or succeeded are in trackedPodRanges."""
    tracked_pod_ranges: Annotated[list[TrackedPodRange], Field(max_length=MAX_RANGES)] = Field(
        default_factory=list, json_schema_extra=LIST_ATOMIC
    )
    """Bookkeeping: more pods of the current attempt, recorded by name alone (model/tracked.py says why that is
    exact): a 10,240-pod gang in a few dozen bytes. Read, they join trackedPods."""
    replacements: Annotated[list[SlotBackoff], Field(max_length=MAX_TRACKED), AfterValidator(unique_by("pod"))] = Field(
        default_factory=list, json_schema_extra=LIST_ATOMIC
    )
    """Bookkeeping: the slots whose pods are re-created alone in the current attempt (parameter-server workers,
    pods a node refused), each with its own backoff."""

    @model_validator(mode="before")
    @classmethod
    def _unpack_tracked(cls, data: Any) -> Any:
        return tracked.unpacked(data)

    @model_serializer(mode="wrap")
    def _pack_tracked(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return tracked.packed(handler(self))

    @property
    def current_pods_attempt(self) -> int:
        """The attempt whose pods the job runs in: the current attempt, or the one whose pods it restarted in."""
        return self.pods_attempt or self.attempt
