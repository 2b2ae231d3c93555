"""The built-in trainer's settings: TJ_TRAINER_CONFIG (JSON, camelCase keys), parsed and validated."""

import json
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from trainer.contract import TRAINER_CONFIG
from trainer.failures import ConfigError


class Workload(StrEnum):
    """The built-in workloads: none of them downloads anything."""

    DIGITS_MLP = "digits-mlp"
    DIGITS_CNN = "digits-cnn"
    SYNTHETIC = "synthetic"


class OptimizerName(StrEnum):
    """The optimizers the built-in trainer offers."""

    SGD = "sgd"
    ADAM = "adam"
    ADAMW = "adamw"


class Precision(StrEnum):
    """fp32, or bf16 autocast (forward and loss in bfloat16, parameters and optimizer in float32)."""

    FP32 = "fp32"
    BF16 = "bf16"


ENTRYPOINT_PATTERN = r"^([A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*|[^:\s]+\.py):[A-Za-z_][A-Za-z0-9_]*$"
DEFAULT_LEARNING_RATE = 0.05


class TrainerConfig(BaseModel):
    """spec.trainer as the trainer receives it; the operator's CRD model mirrors these fields."""

    model_config = ConfigDict(alias_generator=to_camel, extra="forbid", frozen=True)

    entrypoint: str | None = Field(default=None, pattern=ENTRYPOINT_PATTERN, max_length=512)
    config: dict[str, Any] | None = None  # the entrypoint's own settings
    workload: Workload | None = None
    steps: int | None = Field(default=None, ge=1)
    epochs: int | None = Field(default=None, ge=1)
    batch_size: int = Field(default=32, ge=1, le=65536)
    learning_rate: float | None = Field(default=None, gt=0.0, le=10.0)
    optimizer: OptimizerName | None = None
    momentum: float | None = Field(default=None, ge=0.0, lt=1.0)
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    staleness_bound: int = Field(default=8, ge=0, le=1_000_000)
    async_checkpoint: bool = False
    eval_every_steps: int | None = Field(default=None, ge=1)
    gradient_accumulation_steps: int = Field(default=1, ge=1, le=4096)
    clip_grad_norm: float | None = Field(default=None, gt=0.0)
    precision: Precision = Precision.FP32
    data_loader_workers: int = Field(default=0, ge=0, le=64)

    @property
    def builtin_workload(self) -> Workload | None:
        """The built-in workload this config trains: none with an entrypoint, digits-mlp when neither is named."""
        if self.entrypoint is not None:
            return None
        return self.workload or Workload.DIGITS_MLP

    def builtin_settings(self) -> dict[str, Any]:
        """The config a built-in workload's recipe reads: its optimizer settings."""
        return {
            "learningRate": self.learning_rate or DEFAULT_LEARNING_RATE,
            "optimizer": str(self.optimizer or OptimizerName.SGD),
            "momentum": self.momentum or 0.0,
        }


def _field_error(error: Any) -> ConfigError:
    location = ".".join(str(part) for part in error["loc"]) or "(root)"
    if error["type"] == "extra_forbidden":
        return ConfigError(TRAINER_CONFIG, location, "unknown field")
    return ConfigError(TRAINER_CONFIG, location, f"{error['msg']} (got {error.get('input')!r})")


def _check_cross_fields(config: TrainerConfig) -> None:
    if config.steps is None and config.epochs is None:
        raise ConfigError(TRAINER_CONFIG, "steps", "set exactly one of 'steps' or 'epochs'")
    if config.steps is not None and config.epochs is not None:
        raise ConfigError(TRAINER_CONFIG, "steps", "set only one of 'steps' or 'epochs', not both")
    if config.momentum is not None and config.optimizer not in (None, OptimizerName.SGD):
        raise ConfigError(TRAINER_CONFIG, "momentum", "only the 'sgd' optimizer takes a momentum")
    if config.entrypoint is not None:
        for name in ("workload", "learning_rate", "optimizer", "momentum"):
            if getattr(config, name) is not None:
                field = to_camel(name)
                problem = (
                    "is for the built-in workloads; an entrypoint's recipe builds its own (its settings: 'config')"
                )
                raise ConfigError(TRAINER_CONFIG, field, problem)
    elif config.config is not None:
        raise ConfigError(TRAINER_CONFIG, "config", "is the entrypoint's settings: set 'entrypoint' too")


def parse_trainer_config(raw: str | None) -> TrainerConfig:
    """Parse and validate TJ_TRAINER_CONFIG; every error names the offending field."""
    if raw is None or not raw.strip():
        raise ConfigError(TRAINER_CONFIG, "(root)", "the variable is not set; it must hold a JSON object")
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ConfigError(TRAINER_CONFIG, "(root)", f"not valid JSON: {error}") from None
    if not isinstance(data, dict):
        raise ConfigError(TRAINER_CONFIG, "(root)", f"must be a JSON object, got {type(data).__name__}")
    try:
        config = TrainerConfig.model_validate(data)
    except ValidationError as error:
        raise _field_error(error.errors()[0]) from None
    _check_cross_fields(config)
    return config
