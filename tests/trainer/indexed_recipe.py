"""A recipe whose loss writes down the sample indices of every micro-batch it trains on, per attempt and rank, so a
test can check which samples each step saw (tests/trainer/test_elastic_resize.py)."""

import json
import os
from functools import partial
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import TensorDataset

from trainer.recipe import Batch, Recipe

FEATURES, CLASSES = 8, 4


def linear_decay(optimizer: torch.optim.Optimizer, updates: int) -> LambdaLR:
    """The learning rate falls linearly to a tenth over the run: a resume that restarted it would show."""
    return LambdaLR(optimizer, lambda step: 1.0 - 0.9 * step / updates)


def recording_loss(seen: Path, model: nn.Module, batch: Batch) -> torch.Tensor:
    inputs, targets, indices = batch
    where = seen / f"attempt-{os.environ.get('TJ_ATTEMPT', '1')}-rank-{dist.get_rank()}.jsonl"
    with where.open("a") as record:
        record.write(json.dumps(indices.tolist()) + "\n")
    return nn.functional.cross_entropy(model(inputs), targets)


def build(config: dict[str, Any]) -> Recipe:
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(int(config["samples"]), FEATURES, generator=generator)
    targets = inputs[:, :CLASSES].argmax(dim=1)
    data = TensorDataset(inputs, targets, torch.arange(len(inputs)))
    return Recipe(
        model=nn.Linear(FEATURES, CLASSES),
        optimizer=partial(torch.optim.SGD, lr=0.2, momentum=0.9),
        train_data=data,
        loss=partial(recording_loss, Path(config["seenDir"])),
        scheduler=linear_decay,
    )
