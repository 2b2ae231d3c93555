"""The small value types the status and its history share: counts, reasons, metrics, failure classes,
checkpoints."""

from datetime import datetime
from enum import StrEnum
from typing import Annotated

from pydantic import Field

from trainingjob.model.base import ApiModel, Float, Int, Str

Count = Annotated[Int, Field(ge=0)]
Reason = Annotated[Str, Field(pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$", max_length=1024)]
Message = Annotated[Str, Field(max_length=32768)]
# What a kubelet or an apiserver wrote: any characters (e.g. "OutOfnvidia.com/gpu"), kept short.
PodReason = Annotated[Str, Field(max_length=256)]
# The ranks that failed because of a failure (a peer's exit 75), in a short sentence.
CONSEQUENCES_LENGTH = 1024
Consequences = Annotated[Str, Field(max_length=CONSEQUENCES_LENGTH)]
# The trainer's evaluation metrics, e.g. {"accuracy": 0.97, "val/loss": 0.11}: a few named finite numbers.
METRIC_NAME = r"^[A-Za-z_][A-Za-z0-9_.\-/]{0,62}$"
MAX_METRICS = 16
Metrics = Annotated[
    dict[Annotated[Str, Field(pattern=METRIC_NAME, max_length=63)], Annotated[Float, Field(allow_inf_nan=False)]],
    Field(max_length=MAX_METRICS),
]
Percent = Annotated[Int, Field(ge=0, le=100)]


class FailureClass(StrEnum):
    """Why an attempt or pod failed; each class has its own restart counter."""

    RETRYABLE = "Retryable"  # a non-zero exit code that is not permanent, e.g. 75
    PERMANENT = "Permanent"  # an exit code in permanentExitCodes, e.g. 78
    OOM = "OOMKilled"
    DISRUPTION = "Disruption"  # eviction, preemption, node drain or loss, exit 79 after SIGTERM
    STALLED = "Stalled"  # no progress for progressDeadlineSeconds
    DEADLINE = "DeadlineExceeded"  # activeDeadlineSeconds or startupDeadlineSeconds


MAX_KEPT = 32


class CheckpointStatus(ApiModel):
    """The newest complete checkpoint."""

    step: Count
    """The step it was taken at."""
    path: Annotated[Str, Field(max_length=4096)]
    """Its folder in the pods, e.g. /checkpoints/step-1200."""
    time: datetime
    """When it was completed."""
    kept: Annotated[list[Count], Field(max_length=MAX_KEPT)] | None = None
    """The steps of the complete checkpoints on the volume once this one was in and checkpoint.keep had pruned the
    older ones, newest first (at most 32), as the trainer said; unset when it did not say."""
