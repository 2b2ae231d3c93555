"""The TrainingSweep status: every trial with its parameters, phase and objective, counts by phase, the best trial
and conditions. With the trials' jobs it is the sweep's whole memory: the operator keeps no study database."""

from datetime import datetime
from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, Field

from trainingjob.model.base import ApiModel, Bool, Float, Int, Str, list_map, unique_by
from trainingjob.model.status import MAX_CLEARED, CheckpointFolder, ConditionStatus
from trainingjob.model.sweep_space import Value
from trainingjob.model.values import Count, Message, Reason

MAX_TRIALS = 10_000  # the status lists the best, the unfinished and the newest finished; the rest are summarised
MAX_CURVE_POINTS = 16
MAX_LEARNED = 700 * 1024  # status.summarised.learned: the summarised trials' records (sweep/learned.py), base64
MAX_TRIAL_MESSAGE = 1024  # a trial's message is cut to this: 1,000 trials' failures stay well inside the status
# By parameter name (the operator writes them from the spec's names; the CRD cannot check the keys of a map of
# untyped values with CEL, so it does not).
Parameters = Annotated[dict[Annotated[Str, Field(max_length=63)], Value], Field(max_length=16)]
Objective = Annotated[Float, Field(allow_inf_nan=False)]


class SweepPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"

    @property
    def is_terminal(self) -> bool:
        return self in (SweepPhase.SUCCEEDED, SweepPhase.FAILED)


class TrialPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    PRUNED = "Pruned"

    @property
    def is_finished(self) -> bool:
        return self in (TrialPhase.SUCCEEDED, TrialPhase.FAILED, TrialPhase.PRUNED)


class ObjectivePoint(ApiModel):
    """The objective metric as an evaluation during training reported it."""

    step: Count
    """The training step of the evaluation."""
    value: Objective
    """The metric's value."""


class Trial(ApiModel):
    """One trial: a TrainingJob run with one choice of parameters."""

    number: Annotated[Int, Field(ge=0, lt=MAX_TRIALS)]
    """The trial's number, from 0 in the order trials were started."""
    job_name: Annotated[Str, Field(max_length=63)]
    """Its TrainingJob: <sweep>-<number>."""
    parameters: Parameters
    """The parameters it ran with, by parameter name."""
    phase: TrialPhase = TrialPhase.PENDING
    """Pending, Running, Succeeded, Failed or Pruned (stopped early: its objective trailed the others)."""
    objective: Objective | None = None
    """The objective: final once Succeeded, else the latest evaluation's."""
    objective_step: Count | None = None
    """The step the objective was evaluated at."""
    curve: Annotated[list[ObjectivePoint], Field(max_length=MAX_CURVE_POINTS)] = Field(default_factory=list)
    """The objective during training, at most 16 points: at each sixteenth of totalSteps the run has reached (the
    evaluation nearest to it), so every trial is compared at the same steps, however long it ran; without
    totalSteps, at the evaluations spread over the run. What early stopping compares trials by."""
    step: Count | None = None
    """The step its job had reached, as its rank 0 last reported."""
    total_steps: Count | None = None
    """The steps its job runs to, when known: a trial at or past them is never pruned."""
    reason: Reason | None = None
    """Why it ended where it did not succeed, e.g. JobFailed, ObjectiveMissing, PrunedByMedian."""
    message: Message = ""
    """What happened, for people."""
    start_time: datetime | None = None
    """When its job was created."""
    waiting_since: datetime | None = None
    """While its job cannot be made (its name taken, its creation refused): since when; it fails after 10 minutes."""
    completion_time: datetime | None = None
    """When it finished."""
    job_uid: Annotated[Str, Field(max_length=64)] | None = None
    """Its TrainingJob's UID, once seen: its checkpoints are in <checkpoint.path>/<jobName>/<jobUID>."""
    checkpoint_removed: Bool | None = None
    """True once a later trial's trainer removed its checkpoint folder (or found it gone): finished trials other
    than the keepBestCheckpoints best have theirs removed."""


class BestTrial(ApiModel):
    """The trial with the best objective among those that succeeded."""

    number: Annotated[Int, Field(ge=0)]
    """Its number."""
    job_name: Annotated[Str, Field(max_length=63)]
    """Its TrainingJob."""
    parameters: Parameters
    """Its parameters."""
    objective: Objective
    """Its objective."""


class TrialCounts(ApiModel):
    """Trials by phase."""

    pending: Count = 0
    """Created, not yet running."""
    running: Count = 0
    """Running."""
    succeeded: Count = 0
    """Succeeded, with an objective."""
    failed: Count = 0
    """Failed (the job failed, was deleted, or succeeded without the objective metric)."""
    pruned: Count = 0
    """Stopped early."""

    @property
    def started(self) -> int:
        """Every trial started so far, those the status lists and those it summarises."""
        return self.pending + self.running + self.succeeded + self.failed + self.pruned


class SweepConditionType(StrEnum):
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


class SweepCondition(ApiModel):
    """A Kubernetes-style condition of the sweep."""

    type: SweepConditionType
    """Running, Succeeded or Failed."""
    status: ConditionStatus
    """True, False or Unknown."""
    reason: Reason
    """Why, CamelCase, e.g. TrialsRunning, MaxTrialsReached, TooManyFailedTrials."""
    message: Message = ""
    """What happened, as a sentence for people."""
    last_transition_time: datetime
    """When status last changed."""


class SummarisedTrials(ApiModel):
    """The finished trials the status no longer lists one by one (the oldest, never the best): how many ended in
    each phase, and their objectives, so the status stays under 1 MiB however many trials a sweep runs."""

    succeeded: Count = 0
    """Succeeded."""
    failed: Count = 0
    """Failed."""
    pruned: Count = 0
    """Stopped early."""
    objectives: Count = 0
    """How many of them had an objective (their last evaluation's, or a succeeded trial's result)."""
    objective_min: Objective | None = None
    """The least of those objectives."""
    objective_max: Objective | None = None
    """The greatest."""
    objective_mean: Objective | None = None
    """Their mean."""
    checkpoints_removed: Count = 0
    """How many of them had their checkpoint folder removed."""
    learned: Annotated[Str, Field(max_length=MAX_LEARNED)] | None = None
    """What the search and early stopping learn from them: each succeeded or pruned one's parameters, objective and
    curve, packed (base64; the operator's own format, see sweep/learned.py)."""

    @property
    def total(self) -> int:
        return self.succeeded + self.failed + self.pruned


class SweeperPhase(StrEnum):
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


class Sweeper(ApiModel):
    """The job that removes the last trials' checkpoint folders once every trial has finished (no trial follows
    them to do it): it trains nothing. Never a trial; the sweep ends once it has finished, failed or run out its
    time (10 minutes)."""

    number: Annotated[Int, Field(ge=1, le=MAX_TRIALS)]
    """1 for the first; one more for each that follows (each removes at most 40 folders)."""
    job_name: Annotated[Str, Field(max_length=63)]
    """Its TrainingJob."""
    folders: Annotated[list[CheckpointFolder], Field(max_length=MAX_CLEARED)] = Field(default_factory=list)
    """The folders it was told to remove, as "<job name>/<job uid>" under the checkpoint path."""
    phase: SweeperPhase = SweeperPhase.RUNNING
    """Running (its job is made or to be made), Succeeded or Failed."""
    message: Message = ""
    """Why it failed, for people."""
    since: datetime
    """When the sweep decided to make it: it fails 10 minutes later if its job has not finished."""
    start_time: datetime | None = None
    """When its job was first seen."""


class TrainingSweepStatus(ApiModel):
    """The observed state of the sweep, written by the operator."""

    phase: SweepPhase = SweepPhase.PENDING
    """Pending, Running, Succeeded or Failed; the last two are final."""
    conditions: Annotated[list[SweepCondition], Field(max_length=8), AfterValidator(unique_by("type"))] = Field(
        default_factory=list, json_schema_extra=list_map("type")
    )
    """Running, Succeeded and Failed, with reasons."""
    observed_generation: Annotated[Int, Field(ge=0)] | None = None
    """The metadata.generation this status was computed from."""
    trials: Annotated[list[Trial], Field(max_length=MAX_TRIALS), AfterValidator(unique_by("number"))] = Field(
        default_factory=list, json_schema_extra=list_map("number")
    )
    """The trials by number: every unfinished one, the best, and the newest finished ones (older finished trials
    are counted in summarised)."""
    summarised: SummarisedTrials | None = None
    """The older finished trials not listed in trials: counts by phase and objective statistics."""
    counts: TrialCounts = Field(default_factory=TrialCounts)
    """Trials by phase."""
    best_trial: BestTrial | None = None
    """The best trial that succeeded so far."""
    checkpoints_removed: Count = 0
    """Finished trials whose checkpoint folders were removed (listed and summarised): see keepBestCheckpoints."""
    sweeper: Sweeper | None = None
    """The latest job that removed (or removes) the last trials' checkpoint folders, with a persistentVolumeClaim."""
    start_time: datetime | None = None
    """When the first trial was created."""
    completion_time: datetime | None = None
    """When the sweep reached Succeeded or Failed."""
