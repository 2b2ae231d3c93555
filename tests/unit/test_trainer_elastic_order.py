"""The data order of an elastic job: every step trains on the same global batch at any world size, so a run resumed
on fewer (or more) ranks sees each sample of the epoch once and takes optimizer steps of the same size."""

from functools import partial
from itertools import pairwise
from typing import cast

import pytest
import torch
from torch import nn
from torch.utils.data import Dataset, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from trainer.config import parse_trainer_config
from trainer.data import DataOrder
from trainer.recipe import Recipe, cross_entropy
from trainer.steps import accumulate_gradients

pytestmark = pytest.mark.fast

CPU = torch.device("cpu")
SAMPLES, BATCH, ACCUMULATION, SEED = 200, 5, 2, 11  # 3 of 4 ranks share a global batch of 40 unevenly


def order(world: int, rank: int, full: int) -> DataOrder:
    return DataOrder(SAMPLES, BATCH, ACCUMULATION, replicas=world, rank=rank, seed=SEED, full_replicas=full)


def step_samples(world: int, full: int, step: int) -> list[int]:
    """Every rank's samples of one step, rank by rank."""
    return [int(i) for rank in range(world) for b in order(world, rank, full).micro_batches(step, step + 1) for i in b]


@pytest.mark.parametrize("world", [1, 2, 3, 4], ids=["one", "two", "three", "four"])
def test_at_the_full_world_the_order_is_distributed_samplers(world: int) -> None:
    """A job that never resizes trains on exactly the samples, in the order, it always did."""
    for rank in range(world):
        sampler: DistributedSampler[int] = DistributedSampler(
            cast("Dataset[int]", range(SAMPLES)), num_replicas=world, rank=rank, shuffle=True, seed=SEED, drop_last=True
        )
        ours = order(world, rank, world)
        for epoch in range(2):
            sampler.set_epoch(epoch)
            share = list(sampler)
            steps = range(epoch * ours.steps_per_epoch, (epoch + 1) * ours.steps_per_epoch)
            taken = [int(i) for step in steps for batch in ours.micro_batches(step, step + 1) for i in batch]
            assert taken == share[: len(taken)]
            assert ours.micro_batch_sizes == (BATCH,) * ACCUMULATION


@pytest.mark.parametrize(
    ("full", "world"),
    [(4, 4), (4, 3), (4, 2), (4, 1), (3, 2), (2, 1)],
    ids=["4-of-4", "3-of-4", "2-of-4", "1-of-4", "2-of-3", "1-of-2"],
)
def test_a_step_trains_on_the_same_global_batch_at_any_world_size(full: int, world: int) -> None:
    steps = order(full, 0, full).steps_per_epoch
    assert order(world, 0, full).steps_per_epoch == steps == SAMPLES // (BATCH * ACCUMULATION * full)
    for step in (0, 1, steps - 1, steps, steps + 2):
        at_world, at_full = step_samples(world, full, step), step_samples(full, full, step)
        assert len(at_world) == len(set(at_world)) == BATCH * ACCUMULATION * full
        assert set(at_world) == set(at_full)


@pytest.mark.parametrize(
    ("full", "worlds"),
    [(2, (2, 1)), (4, (4, 2)), (4, (4, 3, 1, 4)), (3, (1, 3))],
    ids=["2-then-1", "4-then-2", "4-3-1-4", "1-then-3"],
)
def test_an_epoch_resized_mid_way_sees_every_sample_once(full: int, worlds: tuple[int, ...]) -> None:
    steps = order(full, 0, full).steps_per_epoch
    bounds = [round(steps * part / len(worlds)) for part in range(len(worlds) + 1)]
    seen = [
        index
        for world, (first, end) in zip(worlds, pairwise(bounds), strict=True)
        for step in range(first, end)
        for index in step_samples(world, full, step)
    ]
    used = steps * BATCH * ACCUMULATION * full  # the epoch's tail that no whole step takes is left out, as before
    assert sorted(seen) == sorted(order(full, 0, full).permutation(0)[:used].tolist())
    assert len(seen) == len(set(seen)) == used


def test_position_is_a_global_sample_offset_and_step_at_reverses_it() -> None:
    at_two, at_one = order(2, 1, 2), order(1, 0, 2)
    steps = at_two.steps_per_epoch
    for step in (0, 5, steps - 1, steps, 3 * steps + 2):
        epoch, offset = at_two.position(step)
        assert (epoch, offset) == at_one.position(step) == (step // steps, (step % steps) * at_two.global_batch)
        assert at_one.step_at(epoch, offset) == step
    with pytest.raises(ValueError, match="no step starts at sample 5"):
        at_one.step_at(0, 5)


def test_a_world_larger_than_the_job_is_refused() -> None:
    with pytest.raises(ValueError, match="3 replicas does not fit a job of 2"):
        order(3, 0, 2)


def linear_recipe() -> Recipe:
    torch.manual_seed(0)
    return Recipe(model=nn.Linear(5, 3), optimizer=partial(torch.optim.SGD, lr=0.1), train_data=TensorDataset())


@pytest.mark.parametrize(
    ("full", "world"), [(4, 4), (4, 3), (4, 1), (2, 1)], ids=["4-of-4", "3-of-4", "1-of-4", "1-of-2"]
)
def test_the_averaged_gradient_is_the_global_batchs_mean_at_any_world(full: int, world: int) -> None:
    """What DDP all-reduces (the mean of the ranks' accumulated gradients) is the gradient of the mean loss over the
    step's global batch, however unevenly the batch falls on the ranks."""
    x, y = torch.randn(SAMPLES, 5), torch.randint(3, (SAMPLES,))
    config = parse_trainer_config('{"steps": 1}')
    recipe = linear_recipe()
    ranks = []
    for rank in range(world):
        data = order(world, rank, full)
        recipe.model.zero_grad()
        batches = [(x[i], y[i]) for i in data.micro_batches(2, 3)]
        accumulate_gradients(recipe.model, recipe, batches, config, device=CPU, divisors=data.loss_divisors)
        ranks.append(torch.cat([p.grad.flatten() for p in recipe.model.parameters() if p.grad is not None]))
    averaged = torch.stack(ranks).mean(0)
    recipe.model.zero_grad()
    whole = torch.tensor(step_samples(full, full, 2))
    cross_entropy(recipe.model, (x[whole], y[whole])).backward()  # type: ignore[no-untyped-call]
    expected = torch.cat([p.grad.flatten() for p in recipe.model.parameters() if p.grad is not None])
    assert torch.allclose(averaged, expected, atol=1e-6)
