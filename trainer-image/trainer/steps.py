"""One training step's gradients and one evaluation pass, the same in DDP and parameter-server mode."""

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch
from torch import nn

from trainer.config import Precision, TrainerConfig
from trainer.contract import TRAINER_CONFIG
from trainer.data import eval_batches, to_device
from trainer.failures import ConfigError, user_code
from trainer.recipe import Batch, Recipe

Sums = tuple[dict[str, float], int]
"""Per-metric sums of (batch mean x batch size), and the number of samples they cover."""


def autocast(device: torch.device, precision: Precision) -> AbstractContextManager[Any]:
    """bf16 autocast on the device when asked for; nothing otherwise."""
    if precision == Precision.BF16:
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return nullcontext()


def accumulate_gradients(
    model: nn.Module,
    recipe: Recipe,
    batches: list[Batch],
    config: TrainerConfig,
    *,
    device: torch.device,
    no_sync: Callable[[], AbstractContextManager[Any]] | None = None,
    divisors: Sequence[float] | None = None,
) -> float:
    """Backward over the step's micro-batches, each loss divided by its `divisors` entry (by the micro-batch count,
    their mean, when not given), then clip; `no_sync` skips DDP's all-reduce on all but the last micro-batch.
    Returns the mean of the micro-batches' losses."""
    total = torch.zeros((), device=device)
    for index, batch in enumerate(batches):
        skip_sync = no_sync is not None and index < len(batches) - 1
        with no_sync() if skip_sync and no_sync is not None else nullcontext():
            with autocast(device, config.precision), user_code("loss"):
                loss = recipe.loss(model, batch)
            (loss / (len(batches) if divisors is None else divisors[index])).backward()  # type: ignore[no-untyped-call]
        total += loss.detach().float()
    if config.clip_grad_norm is not None:
        nn.utils.clip_grad_norm_(model.parameters(), config.clip_grad_norm)
    return float(total.item()) / len(batches)


def batch_length(batch: Batch) -> int:
    """Samples in a batch: the first dimension of the first tensor in it."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() else 1
    if isinstance(batch, dict):
        batch = list(batch.values())
    if isinstance(batch, tuple | list) and batch:
        return batch_length(batch[0])
    raise ConfigError(TRAINER_CONFIG, "entrypoint", f"cannot tell how many samples a {type(batch).__name__} holds")


def _number(name: object, value: object) -> float:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return float(value.item())
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise ConfigError(TRAINER_CONFIG, "entrypoint", f"metric {name!r} is a {type(value).__name__}, not a number")


@torch.no_grad()
def evaluate(
    module: nn.Module, recipe: Recipe, batches: Iterable[Batch], device: torch.device, config: TrainerConfig
) -> Sums:
    """The recipe's metrics over this replica's evaluation batches, in eval mode (train mode restored after)."""
    was_training = module.training
    module.eval()
    sums: dict[str, float] = {}
    count = 0
    try:
        for batch in batches:
            on_device = to_device(batch, device)
            size = batch_length(on_device)
            with autocast(device, config.precision), user_code("metrics"):
                metrics = recipe.evaluation_metrics(module, on_device)
            for name, value in metrics.items():
                sums[str(name)] = sums.get(str(name), 0.0) + _number(name, value) * size
            count += size
    finally:
        module.train(was_training)
    return sums, count


def evaluate_share(
    module: nn.Module, recipe: Recipe, config: TrainerConfig, device: torch.device, *, replicas: int, rank: int
) -> Sums:
    """evaluate() over this replica's share of the recipe's evaluation set (it has one: the caller checks)."""
    assert recipe.eval_data is not None
    batches = eval_batches(
        recipe.eval_data,
        config.batch_size,
        replicas,
        rank,
        workers=config.data_loader_workers,
        collate=recipe.collate,
    )
    return evaluate(module, recipe, batches, device, config)


def means(parts: Iterable[Sums]) -> dict[str, float]:
    """Sample-weighted means of every metric over every replica's part."""
    totals: dict[str, float] = {}
    count = 0
    for sums, samples in parts:
        for name, value in sums.items():
            totals[name] = totals.get(name, 0.0) + value
        count += samples
    return {name: value / count for name, value in sorted(totals.items())} if count else {}
