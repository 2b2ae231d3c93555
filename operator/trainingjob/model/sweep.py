"""The TrainingSweep resource: a hyperparameter search that runs TrainingJobs as its trials, stops the weak ones
early from their evaluation curves, and ranks them by an objective metric."""

from enum import StrEnum
from typing import Annotated

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from trainingjob.model.base import ApiModel, Bool, Int, RuledModel, Str, unique_by
from trainingjob.model.job import MAX_NAME_LENGTH, ApiObject, name_rule
from trainingjob.model.rules import Immutable, Reason, Rule
from trainingjob.model.spec import TrainingJobSpec
from trainingjob.model.sweep_fill import space_problems
from trainingjob.model.sweep_space import Parameter
from trainingjob.model.sweep_status import MAX_TRIALS, TrainingSweepStatus
from trainingjob.model.values import METRIC_NAME

SWEEP_KIND = "TrainingSweep"
SWEEP_PLURAL = "trainingsweeps"
SWEEP_SINGULAR = "trainingsweep"
SWEEP_SHORT_NAMES = ("tjs",)
# A trial's job is "<sweep>-<number>": room for numbers up to 999 within a job name; a sweep of more trials needs a
# name shorter by a character for each further digit (the rule _trial_names).
MAX_SWEEP_NAME_LENGTH = MAX_NAME_LENGTH - 1 - len("999")
MAX_PARAMETERS = 16


class Goal(StrEnum):
    MINIMIZE = "Minimize"
    MAXIMIZE = "Maximize"


class Objective(ApiModel):
    """What the sweep ranks trials by: an evaluation metric the trainer reports (status.result.metrics)."""

    metric: Annotated[Str, Field(pattern=METRIC_NAME, max_length=63)]
    """The metric's name, e.g. accuracy or val/loss. A trial whose job succeeds without it fails."""
    goal: Goal
    """Minimize or Maximize."""


class Algorithm(StrEnum):
    GRID = "Grid"
    RANDOM = "Random"
    TPE = "TPE"


class SearchSpec(ApiModel):
    """How the next trial's parameters are chosen."""

    algorithm: Algorithm = Algorithm.TPE
    """Grid (each combination once, in the seed's random order of the whole grid, as many as maxTrials: raising
    maxTrials continues the same order; Float parameters need a step), Random, or TPE (Bayesian: the
    Tree-structured Parzen Estimator, which samples at random for its first startupTrials)."""
    seed: Annotated[Int, Field(ge=0, le=2**31 - 1)] = 0
    """Seeds the samplers: the same sweep with the same results samples the same parameters."""
    startup_trials: Annotated[Int, Field(ge=0, le=MAX_TRIALS)] = 5
    """TPE only: trials sampled at random before the model of good and bad parameters takes over."""


class PruningAlgorithm(StrEnum):
    MEDIAN = "Median"
    SUCCESSIVE_HALVING = "SuccessiveHalving"


class PrunedTrialAction(StrEnum):
    SUSPEND = "Suspend"
    DELETE = "Delete"


class EarlyStopping(ApiModel):
    """Stop trials whose objective, as evaluated during training (spec.trainer.evalEverySteps), trails the others."""

    algorithm: PruningAlgorithm = PruningAlgorithm.MEDIAN
    """Median: stop a trial whose best value so far is worse than the median of the finished trials at the same
    step (each one's latest evaluation at or before it; startupTrials of them at least).
    SuccessiveHalving (asynchronous, ASHA): at steps minSteps x reductionFactor^k keep only the best
    1/reductionFactor of the trials that got there."""
    startup_trials: Annotated[Int, Field(ge=0, le=MAX_TRIALS)] = 3
    """Median only: trials that must finish before any is stopped."""
    warmup_steps: Annotated[Int, Field(ge=0, le=1_000_000_000)] = 0
    """Median only: no trial is stopped before this step."""
    min_steps: Annotated[Int, Field(ge=1, le=1_000_000_000)] | None = None
    """SuccessiveHalving only: the step of the first rung; unset: a hundredth of the most steps a succeeded trial
    was evaluated at (no trial is stopped before one has succeeded)."""
    reduction_factor: Annotated[Int, Field(ge=2, le=100)] = 3
    """SuccessiveHalving only: how many trials reach a rung for each one promoted past it."""
    action: PrunedTrialAction = PrunedTrialAction.DELETE
    """How a stopped trial's job ends, once the sweep's status has recorded the trial (its objective, curve and
    reason stay there): Delete (the default: the trial is over, its job goes with its pods) or Suspend (its pods
    go, the job and its own history stay, Suspended: resumable by hand, and counted by a quota on TrainingJobs)."""


class TrialTemplate(ApiModel):
    """The TrainingJob each trial runs, before the trial's parameters are filled in."""

    metadata: "TemplateMeta | None" = None
    """Labels and annotations every trial's job gets."""
    spec: TrainingJobSpec
    """The job's spec; each parameter's path names a field of it."""


class TemplateMeta(ApiModel):
    """Labels and annotations of the trials' jobs."""

    labels: dict[str, str] | None = None
    """Labels of every trial's job (beside the sweep's own trainingjob.io/sweep and trainingjob.io/trial)."""
    annotations: dict[str, str] | None = None
    """Annotations of every trial's job."""


TrialTemplate.model_rebuild()


def _grid_ready(spec: "TrainingSweepSpec") -> bool:
    return spec.search.algorithm != Algorithm.GRID or all(p.is_finite for p in spec.parameters)


def _trials_kept(spec: "TrainingSweepSpec") -> bool:
    return spec.template.spec.run_policy.ttl_seconds_after_finished is None


class TrainingSweepSpec(RuledModel):
    """The desired state of a sweep: what to vary, what to optimize, how many trials, how many at once."""

    template: Annotated[TrialTemplate, Immutable("template", kind=SWEEP_KIND)]
    """The job every trial runs, with the trial's parameters filled in."""
    parameters: Annotated[
        list[Parameter], Field(min_length=1, max_length=MAX_PARAMETERS), Immutable("parameters", kind=SWEEP_KIND)
    ]
    """The search space: each parameter names a field of the template and the values it may take."""
    objective: Annotated[Objective, Immutable("objective", kind=SWEEP_KIND)]
    """The metric trials are ranked by, and whether lower or higher is better."""
    search: Annotated[SearchSpec, Immutable("search", kind=SWEEP_KIND)] = Field(
        default_factory=SearchSpec, json_schema_extra={"default": {}}
    )
    """How parameters are sampled."""
    early_stopping: EarlyStopping | None = None
    """Stop weak trials before they finish; no trial is stopped early when unset."""
    max_trials: Annotated[Int, Field(ge=1, le=MAX_TRIALS)] = 10
    """Trials to run in all (a grid with fewer combinations runs each once)."""
    parallelism: Annotated[Int, Field(ge=1, le=100)] = 2
    """Trials running at once."""
    max_failed_trials: Annotated[Int, Field(ge=0, le=MAX_TRIALS)] = 3
    """The sweep fails once more trials than this have failed (pruned trials are not failures)."""
    suspend: Bool = False
    """Start no new trials while true; running ones go on."""
    keep_best_checkpoints: Annotated[Int, Field(ge=0, le=MAX_TRIALS)] = 1
    """With a persistentVolumeClaim checkpoint volume: the checkpoint folders of finished trials (succeeded, failed,
    pruned, deleted) are removed, all but those of this many best succeeded trials (0: none kept). Each new trial's
    rank 0 removes them as it starts (the operator has no access to volumes), and once every trial has finished
    the sweeper (status.sweeper), a job that trains nothing, removes the last ones; status.checkpointsRemoved
    counts them."""

    cross_field_rules = (
        Rule(
            field="parameters",
            cel="self.search.algorithm != 'Grid' || self.parameters.all(p, p.type != 'Float' || has(p.step))",
            message="Grid search needs a step on every Float parameter (or give its values as Categorical)",
            reason=Reason.INVALID,
            holds=_grid_ready,
        ),
        Rule(
            field="template.spec.runPolicy.ttlSecondsAfterFinished",
            cel="!has(self.template.spec.runPolicy) || !has(self.template.spec.runPolicy.ttlSecondsAfterFinished)",
            message=(
                "a sweep keeps its trials' jobs (they go when the sweep is deleted): a TTL would delete a finished"
                " trial before the sweep recorded its objective"
            ),
            reason=Reason.FORBIDDEN,
            holds=_trials_kept,
        ),
    )

    @field_validator("parameters")
    @classmethod
    def _unique_names(cls, parameters: list[Parameter]) -> list[Parameter]:
        unique_by("name")(parameters)
        unique_by("path")(parameters)
        return parameters

    @model_validator(mode="after")
    def _fills_valid_jobs(self) -> "TrainingSweepSpec":
        template = self.template.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
        problems = space_problems(template, self.parameters)
        if problems:
            errors = [
                InitErrorDetails(
                    type=PydanticCustomError("field_invalid", problem),
                    loc=("parameters", index),
                    input=self.parameters[index].name,
                )
                for index, problem in problems.items()
            ]
            raise ValidationError.from_exception_data(type(self).__name__, errors)
        return self


def _trial_names_fit(sweep: "TrainingSweep") -> bool:
    name = sweep.metadata.name
    return name is None or len(name) + 1 + len(str(sweep.spec.max_trials - 1)) <= MAX_NAME_LENGTH


class TrainingSweep(ApiObject):
    """A hyperparameter sweep: TrainingJobs as trials, sampled, stopped early and ranked by one metric."""

    kind: Str = SWEEP_KIND
    """TrainingSweep"""
    spec: TrainingSweepSpec
    """The desired state of the sweep."""
    status: TrainingSweepStatus | None = None
    """The observed state of the sweep, written by the operator."""

    cross_field_rules = (
        name_rule(MAX_SWEEP_NAME_LENGTH),
        Rule(
            field="metadata.name",
            cel=f"self.metadata.name.size() + 1 + string(self.spec.maxTrials - 1).size() <= {MAX_NAME_LENGTH}",
            message=(
                f"metadata.name with '-' and the last trial's number (maxTrials - 1) must fit a TrainingJob's name"
                f" ({MAX_NAME_LENGTH} characters): shorten the name or lower maxTrials"
            ),
            reason=Reason.INVALID,
            holds=_trial_names_fit,
        ),
    )
