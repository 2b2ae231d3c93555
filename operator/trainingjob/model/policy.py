"""The policies of a job: checkpointing, restarts and deadlines, and scheduling."""

from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, Field, StrictInt, StrictStr

from trainingjob.children.contract import ExitCode
from trainingjob.model.base import (
    DNS_SUBDOMAIN,
    LABEL_VALUE,
    LIST_SET,
    ApiModel,
    Bool,
    Int,
    RuledModel,
    Str,
    int_or_string,
    unique_values,
)
from trainingjob.model.roles import MAX_PODS
from trainingjob.model.rules import Immutable, Reason, Rule
from trainingjob.model.volumes import (
    RESERVED_MOUNT_ROOT,
    SHM_PATH,
    AbsolutePath,
    EmptyDirSource,
    HostPathSource,
    PersistentVolumeClaimSource,
    outside,
    outside_cel,
)

DEFAULT_PERMANENT_EXIT_CODES = (int(ExitCode.PERMANENT),)
Seconds = Annotated[Int, Field(ge=1, le=31_536_000)]  # at most a year
DEFAULT_STARTUP_DEADLINE_SECONDS = 1800
ObjectName = Annotated[Str, Field(pattern=DNS_SUBDOMAIN, max_length=253)]
AUTO = "Auto"
MAX_EVERY_STEPS = 1_000_000_000


def _check_every_steps(value: int | str) -> int | str:
    if isinstance(value, str) and value != AUTO:
        raise ValueError(f"must be a number of steps or {AUTO!r}, got {value!r}")
    if isinstance(value, int) and not 1 <= value <= MAX_EVERY_STEPS:
        raise ValueError(f"must be from 1 to {MAX_EVERY_STEPS}, got {value}")
    return value


StepsOrAuto = Annotated[
    StrictInt | StrictStr,
    AfterValidator(_check_every_steps),
    int_or_string(minimum=1, maximum=MAX_EVERY_STEPS, pattern=f"^{AUTO}$"),
]


class RestartPolicy(StrEnum):
    NEVER = "Never"
    ON_FAILURE = "OnFailure"
    EXIT_CODE = "ExitCode"


class CleanPodPolicy(StrEnum):
    ALL = "All"
    RUNNING = "Running"
    NONE = "None"


class CheckpointVolume(RuledModel):
    """The volume checkpoints are written to: exactly one source. Use a PersistentVolumeClaim (ReadWriteMany
    for
    more than one pod) to keep checkpoints across pod restarts; emptyDir is lost with the pod."""

    persistent_volume_claim: PersistentVolumeClaimSource | None = None
    """A PersistentVolumeClaim in the job's namespace."""
    empty_dir: EmptyDirSource | None = None
    """A directory that lives as long as the pod; for tests only, since a restarted pod starts empty."""
    host_path: HostPathSource | None = None
    """A directory of the node; for single-node clusters or a filesystem shared by every node."""

    cross_field_rules = (
        Rule(
            field="persistentVolumeClaim",
            cel="[has(self.persistentVolumeClaim), has(self.emptyDir), has(self.hostPath)].filter(x, x).size() == 1",
            message="set exactly one of persistentVolumeClaim, emptyDir or hostPath",
            reason=Reason.INVALID,
            holds=lambda v: [v.persistent_volume_claim, v.empty_dir, v.host_path].count(None) == 2,
        ),
    )


_OPERATOR_PATHS = (RESERVED_MOUNT_ROOT, SHM_PATH)


class CheckpointSpec(RuledModel):
    """Where, how often and how many checkpoints the trainer keeps."""

    volume: Annotated[CheckpointVolume, Immutable("volume")]
    """The volume checkpoints are written to; mounted in every pod at path."""
    path: Annotated[AbsolutePath, Immutable("path")] = "/checkpoints"
    """Absolute path in the pods where the checkpoint volume is mounted. Each job writes its step-N folders
    in a folder of its own there, <path>/<job name>/<job uid> (TJ_CHECKPOINT_DIR), so jobs sharing a volume,
    or a job deleted and created again under the same name, never resume from or prune each other's
    checkpoints."""
    every_steps: StepsOrAuto | None = None
    """Checkpoint every this many steps. With everySeconds too, whichever comes first. Auto: the trainer paces
    checkpoints to the job's failure rate, every sqrt(2 x the seconds a save stalls training x the mean time
    between failures) (Young/Daly), within the operator's bounds; status.progress.checkpointPacing says the
    interval in force and why."""
    every_seconds: Seconds | None = None
    """Checkpoint when this many seconds have passed since the last one. With everySteps too, whichever comes
    first."""
    keep: Annotated[Int, Field(ge=1, le=1000)] = 3
    """How many complete checkpoints to keep; older ones are deleted."""

    cross_field_rules = (
        Rule(
            field="everySteps",
            cel="has(self.everySteps) || has(self.everySeconds)",
            message="set everySteps, everySeconds or both",
            reason=Reason.REQUIRED,
            holds=lambda c: c.every_steps is not None or c.every_seconds is not None,
        ),
        Rule(
            field="everySeconds",
            cel=f"!has(self.everySeconds) || !has(self.everySteps) || string(self.everySteps) != '{AUTO}'",
            message=f"leave everySeconds out with everySteps {AUTO}: {AUTO} sets the interval itself",
            reason=Reason.FORBIDDEN,
            holds=lambda c: c.every_seconds is None or not c.auto,
        ),
        Rule(
            field="path",
            cel=" && ".join(outside_cel("self.path", r) for r in _OPERATOR_PATHS),
            message=f"{' and '.join(_OPERATOR_PATHS)} are where the operator mounts the job's key and the pod's"
            " shared memory",
            reason=Reason.INVALID,
            holds=lambda c: all(outside(c.path, r) for r in _OPERATOR_PATHS),
        ),
    )

    @property
    def auto(self) -> bool:
        """Whether the interval follows the failure rate (everySteps: Auto)."""
        return self.every_steps == AUTO


ExitCodeValue = Annotated[Int, Field(ge=1, le=255)]


class RunPolicy(RuledModel):
    """Restarts, deadlines, cleanup and suspension. Preemptions and node drains never count against
    backoffLimit."""

    restart_policy: RestartPolicy = RestartPolicy.EXIT_CODE
    """When a failed attempt is restarted. Never: the first failure fails the job. OnFailure: every failure is
    retried. ExitCode: failures are retried unless the exit code is in permanentExitCodes."""
    permanent_exit_codes: Annotated[list[ExitCodeValue] | None, Field(max_length=32), AfterValidator(unique_values)] = (
        Field(default=None, json_schema_extra=LIST_SET)
    )
    """Only with restartPolicy ExitCode: exit codes that fail the job without a restart. [78] when unset (the
    trainer's code for a bad configuration)."""
    backoff_limit: Annotated[Int, Field(ge=0, le=1000)] = 3
    """Restarts allowed for failures that are the job's own (non-zero exits, OOM kills, evictions for
    exceeding its ephemeral-storage or emptyDir limits, stalls) before the job fails."""
    disruption_limit: Annotated[Int, Field(ge=0, le=10000)] = 100
    """Restarts allowed for disruptions (eviction under node pressure, preemption, drain, node loss, a pod
    deleted by someone else, exit 79 after SIGTERM) before the job fails; they never count against backoffLimit.
    A pod its node's kubelet refused to admit (OutOfnvidia.com/gpu, UnexpectedAdmissionError) is no disruption: it
    never started, so it alone is created again, under startupDeadlineSeconds."""
    active_deadline_seconds: Seconds | None = None
    """Fail the job when it has run this long in total (time suspended not counted); no limit when unset."""
    startup_deadline_seconds: Seconds = DEFAULT_STARTUP_DEADLINE_SECONDS
    """Fail the job when a pod is not running this long after it was created, or after its creation was
    first refused (unschedulable, image pull errors, a missing volume or secret, a quota or Pod Security
    refusal), or after a node first refused to admit it (OutOfnvidia.com/gpu: it is created again alone, after a
    delay that doubles with each refusal, and the wait counts from the first). The condition Running says why
    pods wait meanwhile. Default 1800 (30 minutes); raise it for jobs that wait long for capacity, or queue them
    with Kueue (the time a queued job waits to be admitted, with no pods, is not counted)."""
    progress_deadline_seconds: Seconds | None = None
    """Restart the attempt from its checkpoint when rank 0 reports no progress for this long (a hang), on the
    operator's clock: from when the operator last saw its report change (status.progress.lastChangeTime), so a
    node's clock that is off does not count. Only enforced once rank 0 of the current attempt has reported
    progress (the built-in trainer serves it on port 29400, which the operator reads): a program that never
    reports is never restarted for it, and the Running condition says so. Hang detection is off when unset."""
    ttl_seconds_after_finished: Annotated[Int, Field(ge=0, le=31_536_000)] | None = None
    """Delete the job this long after it succeeded or failed; kept when unset."""
    clean_pod_policy: CleanPodPolicy = CleanPodPolicy.RUNNING
    """Which pods to delete when the job finishes: All, Running (keeps failed pods and their logs) or None."""
    suspend: Bool = False
    """True stops the job's pods (they checkpoint on SIGTERM) and keeps it; false resumes from the checkpoint.
    Kueue does not set it: a job with scheduling.queueName waits for Kueue on its own (condition Queued)."""

    cross_field_rules = (
        Rule(
            field="permanentExitCodes",
            cel="!has(self.permanentExitCodes) || self.restartPolicy == 'ExitCode'",
            message="permanentExitCodes is only allowed with restartPolicy ExitCode",
            reason=Reason.FORBIDDEN,
            holds=lambda p: p.permanent_exit_codes is None or p.restart_policy == RestartPolicy.EXIT_CODE,
        ),
    )

    @property
    def effective_permanent_exit_codes(self) -> tuple[int, ...]:
        """The exit codes that fail the job at once, under the restart policy."""
        if self.restart_policy != RestartPolicy.EXIT_CODE:
            return ()
        if self.permanent_exit_codes is None:
            return DEFAULT_PERMANENT_EXIT_CODES
        return tuple(self.permanent_exit_codes)


class SchedulingSpec(ApiModel):
    """How the job's pods are scheduled: scheduler, priority, Kueue queue and gang size."""

    scheduler_name: ObjectName | None = None
    """Scheduler of the pods, e.g. volcano or scheduler-plugins-scheduler; the default scheduler when
    unset."""
    priority_class_name: ObjectName | None = None
    """PriorityClass of every pod, unless a role sets its own."""
    queue_name: Annotated[Str, Field(pattern=LABEL_VALUE, min_length=1, max_length=63)] | None = None
    """Kueue LocalQueue: the operator makes the job's Kueue Workload (one pod set per role) and makes no pods until
    Kueue admits it (phase Pending, condition Queued naming the queue); an eviction or preemption suspends the
    job (its pods checkpoint) until Kueue admits it again. A change moves a Workload that reserves no quota to the
    new LocalQueue (an admitted one stays until it is queued again); removing it deletes the Workload and the job
    runs unqueued. Needs Kueue with TrainingJob.v1alpha1.trainingjob.io in its integrations.externalFrameworks."""
    min_available: Annotated[Int, Field(ge=1, le=MAX_PODS)] | None = None
    """Gang size: pods that must be schedulable together before any starts. Every pod of the job when
    unset."""
