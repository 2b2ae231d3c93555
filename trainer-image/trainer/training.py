"""The pieces both training modes share: optimizers, data order by step, RNG state, one training step."""

import random
from typing import Any, cast

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset
from torch.utils.data.distributed import DistributedSampler

from trainer.config import OptimizerName, TrainerConfig


def configure_determinism(threads: int = 1) -> None:
    """One thread per rank (ranks share the cores); deterministic cuDNN kernels on GPU."""
    # CPU kernels on one thread are already deterministic; use_deterministic_algorithms() would import
    # torch._inductor, which costs seconds at every rank's start.
    torch.set_num_threads(threads)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def build_optimizer(config: TrainerConfig, params: Any) -> torch.optim.Optimizer:
    """The configured optimizer over `params`."""
    if config.optimizer == OptimizerName.ADAM:
        return torch.optim.Adam(params, lr=config.learning_rate)
    if config.optimizer == OptimizerName.ADAMW:
        return torch.optim.AdamW(params, lr=config.learning_rate)
    return torch.optim.SGD(params, lr=config.learning_rate, momentum=config.momentum or 0.0)


class DataOrder:
    """Which samples a replica trains on at each step (a DistributedSampler): a pure function of the step."""

    def __init__(self, samples: int, batch_size: int, replicas: int, rank: int, seed: int) -> None:
        self.sampler: DistributedSampler[int] = DistributedSampler(
            cast("Dataset[int]", range(samples)),
            num_replicas=replicas,
            rank=rank,
            shuffle=True,
            seed=seed,
            drop_last=True,
        )
        self.batch_size = batch_size
        self.steps_per_epoch = len(self.sampler) // batch_size
        if self.steps_per_epoch == 0:
            raise ValueError(f"batchSize {batch_size} is larger than a replica's share ({len(self.sampler)})")
        self._epoch = -1
        self._indices = torch.empty(0, dtype=torch.long)

    def position(self, step: int) -> tuple[int, int]:
        """(epoch, batch position within the epoch) of the batch a step consumes."""
        return divmod(step, self.steps_per_epoch)

    def batch(self, epoch: int, position: int) -> torch.Tensor:
        """Sample indices of one batch."""
        if epoch != self._epoch:
            self.sampler.set_epoch(epoch)
            self._indices = torch.tensor(list(self.sampler), dtype=torch.long)
            self._epoch = epoch
        start = position * self.batch_size
        return self._indices[start : start + self.batch_size]


def total_steps(config: TrainerConfig, steps_per_epoch: int) -> int:
    """`steps`, or `epochs` expressed in steps."""
    if config.steps is not None:
        return config.steps
    assert config.epochs is not None
    return config.epochs * steps_per_epoch


def rng_state() -> dict[str, Any]:
    """Every RNG a training step may touch, in a form torch.load(weights_only=True) accepts."""
    kind, keys, pos, has_gauss, gauss = cast(tuple[str, np.ndarray, int, int, float], np.random.get_state())
    return {
        "torch": torch.get_rng_state(),
        "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, gauss],
        "python": list(random.getstate()),
    }


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what rng_state() captured."""
    torch.set_rng_state(state["torch"])
    kind, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    version, internal, gauss_next = state["python"]
    random.setstate((version, tuple(internal), gauss_next))


def compute_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the model on one batch."""
    return nn.functional.cross_entropy(model(x), y)
