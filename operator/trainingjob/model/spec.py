"""The TrainingJob spec: mode, roles, built-in trainer, checkpoint, run policy and scheduling."""

from enum import StrEnum
from functools import partial
from typing import Annotated

from pydantic import Field

from trainingjob.model.base import ApiModel, Bool, Float, Int
from trainingjob.model.policy import CheckpointSpec, RunPolicy, SchedulingSpec
from trainingjob.model.roles import ParameterServerSpec, WorkerSpec
from trainingjob.rules import FixedPresence, Immutable, Reason, Rule


class Mode(StrEnum):
    DDP = "DDP"
    PARAMETER_SERVER = "ParameterServer"


class Workload(StrEnum):
    DIGITS_MLP = "digits-mlp"
    DIGITS_CNN = "digits-cnn"
    SYNTHETIC = "synthetic"


class Optimizer(StrEnum):
    SGD = "sgd"
    ADAM = "adam"
    ADAMW = "adamw"


class TrainerSpec(ApiModel):
    """Settings of the built-in trainer (the default image), given to it as JSON in TJ_TRAINER_CONFIG."""

    workload: Workload = Workload.DIGITS_MLP
    """What to train: digits-mlp or digits-cnn (the bundled 8x8 digits data set) or synthetic (random data,
    for throughput and fault-tolerance tests)."""
    steps: Annotated[Int, Field(ge=1, le=1_000_000_000)] | None = None
    """Optimizer steps to run in total; set steps or epochs, not both."""
    epochs: Annotated[Int, Field(ge=1, le=1_000_000)] | None = None
    """Passes over the data set to run in total; set steps or epochs, not both."""
    batch_size: Annotated[Int, Field(ge=1, le=65536)] = 32
    """Samples per step on each worker process."""
    learning_rate: Annotated[Float, Field(gt=0, le=10)] = 0.05
    """The optimizer's learning rate."""
    optimizer: Optimizer = Optimizer.SGD
    """sgd, adam or adamw."""
    momentum: Annotated[Float, Field(ge=0, lt=1)] | None = None
    """SGD momentum in [0, 1), only with optimizer sgd; 0 when unset."""
    seed: Annotated[Int, Field(ge=0, le=2**31 - 1)] = 0
    """Random seed of the model's initialization and the data order."""
    staleness_bound: Annotated[Int, Field(ge=0, le=1000)] | None = None
    """ParameterServer mode only: how many updates old a gradient may be when it arrives (staler ones are dropped);
    0 is synchronous: each update averages one gradient from every live worker. 8 when unset (the trainer's default)."""
    async_checkpoint: Bool = False
    """Write checkpoints in a background thread so training does not wait for storage; needs
    spec.checkpoint."""

    cross_field_rules = (
        Rule(
            field="steps",
            cel="has(self.steps) != has(self.epochs)",
            message="set exactly one of steps or epochs",
            reason=Reason.INVALID,
            holds=lambda t: (t.steps is None) != (t.epochs is None),
        ),
        Rule(
            field="momentum",
            cel="!has(self.momentum) || self.optimizer == 'sgd'",
            message="momentum is only used by optimizer sgd",
            reason=Reason.FORBIDDEN,
            holds=lambda t: t.momentum is None or t.optimizer == Optimizer.SGD,
        ),
    )


def _pod_count(spec: "TrainingJobSpec") -> int:
    servers = spec.parameter_servers.replicas if spec.parameter_servers else 0
    return spec.workers.replicas + servers


_PS_COMMAND_NEEDED = "spec.parameterServers.command is required when spec.trainer is not set"


def _checkpoint_path_free(spec: "TrainingJobSpec", role: str) -> bool:
    """No volume of the role is mounted where the checkpoint volume is."""
    found = spec.workers if role == "workers" else spec.parameter_servers
    if spec.checkpoint is None or found is None:
        return True
    return all(m.mount_path != spec.checkpoint.path for m in found.volume_mounts or [])


class TrainingJobSpec(ApiModel):
    """The desired state of a distributed PyTorch training job."""

    mode: Annotated[Mode, Immutable("mode")] = Mode.DDP
    """DDP: workers only, all ranks of one torch.distributed group, worker 0 is the master. ParameterServer:
    parameter servers hold the model and workers push gradients asynchronously."""
    workers: WorkerSpec
    """The worker pods."""
    parameter_servers: Annotated[ParameterServerSpec | None, FixedPresence("parameterServers")] = None
    """The parameter-server pods; required in ParameterServer mode, not allowed in DDP mode."""
    trainer: Annotated[TrainerSpec | None, Immutable("trainer")] = None
    """Run the built-in trainer with these settings. Exactly one of trainer or the roles' command must be set.
    Immutable: the running pods were started with it."""
    checkpoint: Annotated[CheckpointSpec | None, FixedPresence("checkpoint")] = None
    """Where and how often the trainer checkpoints; every restart resumes from the newest complete checkpoint.
    No checkpoints are written when unset."""
    run_policy: RunPolicy = Field(default_factory=RunPolicy, json_schema_extra={"default": {}})
    """Restarts, deadlines, cleanup and suspension."""
    scheduling: SchedulingSpec | None = None
    """Scheduler, priority, Kueue queue and gang size."""

    cross_field_rules = (
        Rule(
            field="parameterServers",
            cel="self.mode != 'ParameterServer' || has(self.parameterServers)",
            message="spec.parameterServers is required when mode is ParameterServer",
            reason=Reason.REQUIRED,
            holds=lambda s: s.mode != Mode.PARAMETER_SERVER or s.parameter_servers is not None,
        ),
        Rule(
            field="parameterServers",
            cel="self.mode != 'DDP' || !has(self.parameterServers)",
            message="spec.parameterServers is not allowed when mode is DDP",
            reason=Reason.FORBIDDEN,
            holds=lambda s: s.mode != Mode.DDP or s.parameter_servers is None,
        ),
        Rule(
            field="trainer.stalenessBound",
            cel="!has(self.trainer) || !has(self.trainer.stalenessBound) || self.mode == 'ParameterServer'",
            message="spec.trainer.stalenessBound is only allowed when mode is ParameterServer",
            reason=Reason.FORBIDDEN,
            holds=lambda s: s.trainer is None or s.trainer.staleness_bound is None or s.mode != Mode.DDP,
        ),
        Rule(
            field="trainer",
            cel="has(self.trainer) || has(self.workers.command)",
            message="set spec.trainer (the built-in trainer) or spec.workers.command (your own program)",
            reason=Reason.REQUIRED,
            holds=lambda s: s.trainer is not None or s.workers.command is not None,
        ),
        Rule(
            field="workers.command",
            cel="!has(self.trainer) || !has(self.workers.command)",
            message="set spec.trainer or spec.workers.command, not both",
            reason=Reason.FORBIDDEN,
            holds=lambda s: s.trainer is None or s.workers.command is None,
        ),
        Rule(
            field="parameterServers.command",
            cel="!has(self.parameterServers) || has(self.trainer) || has(self.parameterServers.command)",
            message=_PS_COMMAND_NEEDED,
            reason=Reason.REQUIRED,
            holds=lambda s: not s.parameter_servers or s.trainer or s.parameter_servers.command is not None,
        ),
        Rule(
            field="parameterServers.command",
            cel="!has(self.parameterServers) || !has(self.trainer) || !has(self.parameterServers.command)",
            message="set spec.trainer or spec.parameterServers.command, not both",
            reason=Reason.FORBIDDEN,
            holds=lambda s: not s.parameter_servers or not s.trainer or s.parameter_servers.command is None,
        ),
        Rule(
            field="trainer.asyncCheckpoint",
            cel="!has(self.trainer) || !self.trainer.asyncCheckpoint || has(self.checkpoint)",
            message="spec.trainer.asyncCheckpoint needs spec.checkpoint",
            reason=Reason.INVALID,
            holds=lambda s: s.trainer is None or not s.trainer.async_checkpoint or s.checkpoint is not None,
        ),
        Rule(
            field="scheduling.minAvailable",
            cel="!has(self.scheduling) || !has(self.scheduling.minAvailable)"
            " || self.scheduling.minAvailable <= self.workers.replicas"
            " + (has(self.parameterServers) ? self.parameterServers.replicas : 0)",
            message="spec.scheduling.minAvailable must not exceed the job's pod count",
            reason=Reason.INVALID,
            holds=lambda s: not s.scheduling or (s.scheduling.min_available or 0) <= _pod_count(s),
        ),
        *(
            Rule(
                field=f"{role}.volumeMounts",
                cel=f"!has(self.checkpoint) || !has(self.{role}) || !has(self.{role}.volumeMounts)"
                f" || self.{role}.volumeMounts.all(m, m.mountPath != self.checkpoint.path)",
                message=f"spec.{role}.volumeMounts: spec.checkpoint.path is where the checkpoint volume is mounted",
                reason=Reason.INVALID,
                holds=partial(_checkpoint_path_free, role=role),
            )
            for role in ("workers", "parameterServers")
        ),
    )
