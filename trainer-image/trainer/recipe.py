"""The training API: a function that returns a Recipe is all a job needs to get the platform's guarantees.

    # shapes.py, named in the job as  spec.trainer.entrypoint: "shapes:build"
    from functools import partial
    import torch
    from trainer.recipe import Recipe, classification_metrics

    def build(config: dict) -> Recipe:
        return Recipe(
            model=SmallCnn(width=config.get("width", 32)),
            optimizer=partial(torch.optim.AdamW, lr=config.get("lr", 1e-3)),
            train_data=Shapes(train=True),
            eval_data=Shapes(train=False),
            metrics=classification_metrics,
        )

The platform calls `build(spec.trainer.config)` in every process (workers and parameter servers) after seeding
torch from spec.trainer.seed, so every process builds the same initial model: keep data sets lazy (read samples in
`__getitem__`). It then trains the model in DDP or parameter-server mode: data order, DataLoader workers, pinned
memory, gradient accumulation, clipping, bf16 autocast, evaluation, checkpoints, resume, SIGTERM, progress and
exit codes come from spec.trainer and the platform, not from this file.

Every random choice a data set makes in `__getitem__` (augmentations) is seeded from (seed, epoch, sample index),
whichever DataLoader worker loads the sample: a resumed run sees the same samples, transformed the same way.
"""

from collections.abc import Callable, Iterable, Mapping, Sized
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.optim.lr_scheduler import LRScheduler
from torch.utils.data import Dataset

Batch = Any
"""What the data set's samples become once collated (a tensor, a tuple, a dict ...), moved to the device."""
LossFn = Callable[[nn.Module, Batch], torch.Tensor]
MetricsFn = Callable[[nn.Module, Batch], Mapping[str, float | torch.Tensor]]
OptimizerFactory = Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer]
SchedulerFactory = Callable[[torch.optim.Optimizer, int], LRScheduler]


def cross_entropy(model: nn.Module, batch: Batch) -> torch.Tensor:
    """The default loss: `batch` is (inputs, class indices); mean cross-entropy of the model's logits."""
    inputs, targets = batch
    return nn.functional.cross_entropy(model(inputs), targets)


def classification_metrics(model: nn.Module, batch: Batch) -> dict[str, torch.Tensor]:
    """Mean cross-entropy and top-1 accuracy on one (inputs, class indices) batch."""
    inputs, targets = batch
    logits = model(inputs)
    return {
        "loss": nn.functional.cross_entropy(logits, targets),
        "accuracy": (logits.argmax(dim=1) == targets).float().mean(),
    }


@dataclass(frozen=True)
class Recipe:
    """What to train, on what, and how its loss and quality are measured.

    model: the nn.Module, built on the CPU; the platform moves it to the device and wraps it.
    optimizer: builds the optimizer from parameters, e.g. `partial(torch.optim.AdamW, lr=3e-4)`. In
        parameter-server mode each server calls it on the parameters it holds.
    train_data, eval_data: map-style data sets (len() and [index]); samples are collated by `collate`.
    loss: (model, batch) -> scalar loss tensor; cross-entropy of (inputs, targets) batches by default.
    metrics: (model, batch) -> {name: mean over the batch}; the platform averages them over the whole evaluation
        set (weighted by batch size, across ranks). By default the loss alone.
    scheduler: (optimizer, total optimizer updates) -> an LR scheduler, stepped after every update.
    collate: the DataLoader's collate_fn; torch's default when unset.
    """

    model: nn.Module
    optimizer: OptimizerFactory
    train_data: Dataset[Any]
    eval_data: Dataset[Any] | None = None
    loss: LossFn = cross_entropy
    metrics: MetricsFn | None = None
    scheduler: SchedulerFactory | None = None
    collate: Callable[[list[Any]], Batch] | None = None

    def evaluation_metrics(self, model: nn.Module, batch: Batch) -> Mapping[str, float | torch.Tensor]:
        """The metrics of one evaluation batch: the recipe's, or the loss alone."""
        if self.metrics is not None:
            return self.metrics(model, batch)
        return {"loss": self.loss(model, batch)}


def length(data: Dataset[Any]) -> int:
    """len() of a map-style data set."""
    if not isinstance(data, Sized):
        raise TypeError(f"{type(data).__name__} has no len(): use a map-style data set")
    return len(data)
