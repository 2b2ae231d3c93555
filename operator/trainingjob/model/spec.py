"""The TrainingJob spec: mode, roles, built-in trainer, checkpoint, run policy and scheduling."""

import json
from enum import StrEnum
from functools import partial
from typing import Annotated, Any

from pydantic import AfterValidator, Field, model_validator
from pydantic.alias_generators import to_snake

from trainingjob.model.base import Bool, Float, Int, RuledModel, Str
from trainingjob.model.budget import check_spec_size
from trainingjob.model.policy import CheckpointSpec, RunPolicy, SchedulingSpec
from trainingjob.model.roles import MAX_PS_WORKERS, ParameterServerSpec, WorkerSpec
from trainingjob.model.rules import FixedPresence, Immutable, Reason, Rule


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


class Precision(StrEnum):
    FP32 = "fp32"
    BF16 = "bf16"


ENTRYPOINT = r"^([A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*|[^:\s]+\.py):[A-Za-z_][A-Za-z0-9_]*$"
CONFIG_MAX_BYTES = 32768


def _config_size(config: dict[str, Any] | None) -> dict[str, Any] | None:
    if config is not None and len(json.dumps(config, separators=(",", ":"))) > CONFIG_MAX_BYTES:
        raise ValueError(f"at most {CONFIG_MAX_BYTES} bytes as JSON: put larger settings in a file or a ConfigMap")
    return config


def _builtin_only_unset(trainer: "TrainerSpec", name: str) -> bool:
    return trainer.entrypoint is None or getattr(trainer, to_snake(name)) is None


class TrainerSpec(RuledModel):
    """Run the platform's trainer (the default image), given these settings as JSON in TJ_TRAINER_CONFIG: your
    recipe (entrypoint) or a built-in workload."""

    entrypoint: Annotated[Str, Field(pattern=ENTRYPOINT, max_length=512)] | None = None
    """Your training code: "package.module:function" (imported from the image, the working directory or
    PYTHONPATH) or "path/to/file.py:function" (relative to the working directory, e.g. a mounted ConfigMap). The
    function gets spec.trainer.config and returns a trainer.recipe.Recipe. A built-in workload runs when unset."""
    config: Annotated[dict[str, Any] | None, AfterValidator(_config_size)] = None
    """Free-form settings handed to the entrypoint's function (at most 32 KiB as JSON); only with entrypoint."""
    workload: Workload | None = None
    """A built-in workload, when no entrypoint is set: digits-mlp (the default) or digits-cnn (the bundled 8x8
    digits data set) or synthetic (random data, for throughput and fault-tolerance tests)."""
    steps: Annotated[Int, Field(ge=1, le=1_000_000_000)] | None = None
    """Optimizer steps to run in total; set steps or epochs, not both."""
    epochs: Annotated[Int, Field(ge=1, le=1_000_000)] | None = None
    """Passes over the data set to run in total; set steps or epochs, not both."""
    batch_size: Annotated[Int, Field(ge=1, le=65536)] = 32
    """Samples per micro-batch on each worker process."""
    gradient_accumulation_steps: Annotated[Int, Field(ge=1, le=4096)] = 1
    """Micro-batches whose gradients are summed into one optimizer step (a step sees batchSize x this samples
    per process)."""
    clip_grad_norm: Annotated[Float, Field(gt=0, le=1_000_000)] | None = None
    """Clip the gradients' global norm to this before each optimizer step; no clipping when unset."""
    precision: Precision = Precision.FP32
    """fp32, or bf16 (forward pass and loss under bfloat16 autocast; parameters and optimizer stay float32)."""
    data_loader_workers: Annotated[Int, Field(ge=0, le=64)] = 0
    """DataLoader worker processes per training process (0: load in the training process). Workers share the
    pod's /dev/shm."""
    eval_every_steps: Annotated[Int, Field(ge=1, le=1_000_000_000)] | None = None
    """Evaluate on the recipe's evaluation data every this many steps (and always at the end); the metrics appear
    in status.progress and the metrics history beside the checkpoints."""
    learning_rate: Annotated[Float, Field(gt=0, le=10)] | None = None
    """Built-in workloads only: the optimizer's learning rate; 0.05 when unset."""
    optimizer: Optimizer | None = None
    """Built-in workloads only: sgd (the default), adam or adamw."""
    momentum: Annotated[Float, Field(ge=0, lt=1)] | None = None
    """Built-in workloads only: SGD momentum in [0, 1), only with optimizer sgd; 0 when unset."""
    seed: Annotated[Int, Field(ge=0, le=2**31 - 1)] = 0
    """Random seed of the model's initialization, the data order and every sample's augmentation."""
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
            cel="!has(self.momentum) || !has(self.optimizer) || self.optimizer == 'sgd'",
            message="momentum is only used by optimizer sgd",
            reason=Reason.FORBIDDEN,
            holds=lambda t: t.momentum is None or t.optimizer in (None, Optimizer.SGD),
        ),
        Rule(
            field="config",
            cel="!has(self.config) || has(self.entrypoint)",
            message="config is handed to the entrypoint: set entrypoint too",
            reason=Reason.FORBIDDEN,
            holds=lambda t: t.config is None or t.entrypoint is not None,
        ),
        *(
            Rule(
                field=name,
                cel=f"!has(self.entrypoint) || !has(self.{name})",
                message=f"{name} is for the built-in workloads; your entrypoint's recipe builds its own"
                " (put its settings in config)",
                reason=Reason.FORBIDDEN,
                holds=partial(_builtin_only_unset, name=name),
            )
            for name in ("workload", "learningRate", "optimizer", "momentum")
        ),
    )


def _pod_count(spec: "TrainingJobSpec") -> int:
    servers = spec.parameter_servers.replicas if spec.parameter_servers else 0
    return spec.workers.replicas + servers


_PS_COMMAND_NEEDED = "spec.parameterServers.command is required when spec.trainer is not set"


def _checkpoint_path_free(spec: "TrainingJobSpec", role: str, containers: str) -> bool:
    """No volume of the role is mounted where the checkpoint volume is, in the trainer's container
    (volumeMounts) or in any init container or sidecar."""
    found = spec.workers if role == "workers" else spec.parameter_servers
    if spec.checkpoint is None or found is None:
        return True
    return spec.checkpoint.path not in found.mount_paths(containers)


def _checkpoint_path_cel(role: str, containers: str) -> str:
    unset = f"!has(self.checkpoint) || !has(self.{role}) || !has(self.{role}.{containers})"
    if containers == "volumeMounts":
        return f"{unset} || self.{role}.volumeMounts.all(m, m.mountPath != self.checkpoint.path)"
    return (
        f"{unset} || self.{role}.{containers}.all(c, !has(c.volumeMounts)"
        " || c.volumeMounts.all(m, m.mountPath != self.checkpoint.path))"
    )


class TrainingJobSpec(RuledModel):
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
            field="workers.replicas",
            cel=f"self.mode != 'ParameterServer' || self.workers.replicas <= {MAX_PS_WORKERS}",
            message=f"workers.replicas is at most {MAX_PS_WORKERS:,} in ParameterServer mode (each worker is "
            "restarted and replaced on its own, with a record of its own in the status)",
            reason=Reason.INVALID,
            holds=lambda s: s.mode != Mode.PARAMETER_SERVER or s.workers.replicas <= MAX_PS_WORKERS,
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
                field=f"{role}.{containers}",
                cel=_checkpoint_path_cel(role, containers),
                message=f"spec.{role}.{containers}: spec.checkpoint.path is where the checkpoint volume is mounted",
                reason=Reason.INVALID,
                holds=partial(_checkpoint_path_free, role=role, containers=containers),
            )
            for role in ("workers", "parameterServers")
            for containers in ("volumeMounts", "initContainers", "sidecars")
        ),
    )

    @model_validator(mode="after")
    def _within_budget(self) -> "TrainingJobSpec":
        check_spec_size(self.model_dump(mode="json", by_alias=True, exclude_none=True), type(self).__name__)
        return self
