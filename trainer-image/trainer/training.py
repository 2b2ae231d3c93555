"""The pieces both training modes share: determinism, the recipe's optimizer and schedule, data order, RNG state."""

import random
from collections.abc import Iterable
from typing import Any, cast

import numpy as np
import torch
from torch import nn
from torch.optim.lr_scheduler import LRScheduler

from trainer.config import TrainerConfig
from trainer.contract import TRAINER_CONFIG
from trainer.data import DataOrder, TrainBatches
from trainer.failures import ConfigError
from trainer.recipe import Recipe, length


def configure_determinism(threads: int = 1) -> None:
    """One thread per rank (ranks share the cores); deterministic cuDNN kernels on GPU."""
    # CPU kernels on one thread are already deterministic; use_deterministic_algorithms() would import
    # torch._inductor, which costs seconds at every rank's start.
    torch.set_num_threads(threads)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def build_optimizer(recipe: Recipe, params: Iterable[nn.Parameter]) -> torch.optim.Optimizer:
    """The recipe's optimizer over `params`; a ConfigError when its factory builds something else."""
    optimizer = recipe.optimizer(params)
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise ConfigError(TRAINER_CONFIG, "entrypoint", f"Recipe.optimizer built a {type(optimizer).__name__}")
    return optimizer


def build_scheduler(recipe: Recipe, optimizer: torch.optim.Optimizer, updates: int) -> LRScheduler | None:
    """The recipe's LR schedule over `updates` optimizer updates, if it has one."""
    if recipe.scheduler is None:
        return None
    scheduler = recipe.scheduler(optimizer, updates)
    if not isinstance(scheduler, LRScheduler):
        raise ConfigError(TRAINER_CONFIG, "entrypoint", f"Recipe.scheduler built a {type(scheduler).__name__}")
    return scheduler


def data_order(
    config: TrainerConfig, samples: int, replicas: int, rank: int, full_replicas: int | None = None
) -> DataOrder:
    """This replica's data order (the global batch defined at `full_replicas`, `replicas` when not given); a
    ConfigError naming batchSize when a step needs more samples than the data set has."""
    try:
        return DataOrder(
            samples,
            config.batch_size,
            config.gradient_accumulation_steps,
            replicas=replicas,
            rank=rank,
            seed=config.seed,
            full_replicas=full_replicas,
        )
    except ValueError as error:
        raise ConfigError(TRAINER_CONFIG, "batchSize", str(error)) from None


def train_batches(
    recipe: Recipe,
    config: TrainerConfig,
    device: torch.device,
    *,
    replicas: int,
    rank: int,
    full_replicas: int | None = None,
) -> TrainBatches:
    """This replica's training batches (and, as .order, its data order) as the config asks for them."""
    order = data_order(config, length(recipe.train_data), replicas, rank, full_replicas)
    return TrainBatches(
        recipe.train_data,
        order,
        device=device,
        seed=config.seed,
        workers=config.data_loader_workers,
        collate=recipe.collate,
    )


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
