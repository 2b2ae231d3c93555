"""Which samples each step trains on, as a pure function of the step, and the batches that carry them.

A replica's samples come from a DistributedSampler (shuffled per epoch from the seed, the same on every rank and
every attempt); a step consumes `accumulation` micro-batches of `batch_size` samples, and never straddles two
epochs. In-memory TensorDatasets are indexed directly; other data sets go through a DataLoader (workers, pinned
memory) whose samples are each loaded under a seed of their own, so augmentations do not depend on which worker
loads a sample or where a run resumed.
"""

import hashlib
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, cast

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset, default_collate
from torch.utils.data.distributed import DistributedSampler

from trainer.failures import user_code
from trainer.recipe import Batch, length


class DataOrder:
    """The sample indices of every micro-batch of one replica."""

    def __init__(
        self, samples: int, micro_batch: int, accumulation: int, *, replicas: int, rank: int, seed: int
    ) -> None:
        self.sampler: DistributedSampler[int] = DistributedSampler(
            cast("Dataset[int]", range(samples)),
            num_replicas=replicas,
            rank=rank,
            shuffle=True,
            seed=seed,
            drop_last=True,
        )
        self.micro_batch, self.accumulation = micro_batch, accumulation
        self.steps_per_epoch = len(self.sampler) // (micro_batch * accumulation)
        if self.steps_per_epoch == 0:
            raise ValueError(
                f"batchSize {micro_batch} x gradientAccumulationSteps {accumulation} is larger than a replica's "
                f"share of the training data ({len(self.sampler)} samples)"
            )
        self._epoch = -1
        self._indices = torch.empty(0, dtype=torch.long)

    def epoch_of(self, step: int) -> int:
        """The epoch a step belongs to."""
        return step // self.steps_per_epoch

    def epoch_indices(self, epoch: int) -> torch.Tensor:
        """Every sample index of this replica in `epoch`, in training order."""
        if epoch != self._epoch:
            self.sampler.set_epoch(epoch)
            self._indices = torch.tensor(list(self.sampler), dtype=torch.long)
            self._epoch = epoch
        return self._indices

    def micro_batches(self, step: int, end_step: int | None = None) -> Iterator[torch.Tensor]:
        """The micro-batches of steps [step, end_step) of one epoch (the rest of step's epoch by default)."""
        epoch, first = divmod(step, self.steps_per_epoch)
        last = self.steps_per_epoch if end_step is None else end_step - epoch * self.steps_per_epoch
        indices = self.epoch_indices(epoch)
        for micro in range(first * self.accumulation, last * self.accumulation):
            yield indices[micro * self.micro_batch : (micro + 1) * self.micro_batch]


def sample_seed(seed: int, epoch: int, index: int) -> int:
    """The seed a sample is loaded under: a hash of (run seed, epoch, index)."""
    digest = hashlib.blake2b(f"{seed}:{epoch}:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


def seed_everything(seed: int) -> None:
    """Seed torch, NumPy and random (every process builds the same initial model from spec.trainer.seed)."""
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    random.seed(seed)


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """torch, NumPy and random seeded with `seed` inside; their previous states restored after."""
    states = torch.get_rng_state(), np.random.get_state(), random.getstate()
    seed_everything(seed)
    try:
        yield
    finally:
        torch.set_rng_state(states[0])
        np.random.set_state(states[1])
        random.setstate(states[2])


class SeededSamples(Dataset[Any]):
    """A data set read by (epoch, index): each sample is loaded under sample_seed(seed, epoch, index)."""

    def __init__(self, data: Dataset[Any], seed: int) -> None:
        self.data, self.seed = data, seed

    def __len__(self) -> int:
        return length(self.data)

    def __getitem__(self, key: tuple[int, int]) -> Any:
        epoch, index = key
        with seeded(sample_seed(self.seed, epoch, index)):
            return self.data[index]


def to_device(batch: Batch, device: torch.device) -> Batch:
    """The batch with every tensor in it (in tuples, lists and dicts too) on `device`."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, tuple | list):
        return type(batch)(to_device(item, device) for item in batch)
    if isinstance(batch, dict):
        return {key: to_device(value, device) for key, value in batch.items()}
    return batch


class _StepKeys:
    """A DataLoader's batch sampler: the (epoch, index) keys of every micro-batch from `first_step` to its epoch's
    end. Moving `first_step` and starting a new iteration reuses the loader's (persistent) workers."""

    def __init__(self, order: DataOrder) -> None:
        self.order, self.first_step = order, 0

    def __iter__(self) -> Iterator[list[tuple[int, int]]]:
        epoch = self.order.epoch_of(self.first_step)
        for batch in self.order.micro_batches(self.first_step):
            yield [(epoch, int(index)) for index in batch]

    def __len__(self) -> int:
        left = self.order.steps_per_epoch - self.first_step % self.order.steps_per_epoch
        return left * self.order.accumulation


class TrainBatches:
    """The micro-batches of each step of one replica, on its device, prefetched by DataLoader workers if any."""

    def __init__(
        self,
        data: Dataset[Any],
        order: DataOrder,
        *,
        device: torch.device,
        seed: int,
        workers: int = 0,
        collate: Callable[[list[Any]], Batch] | None = None,
    ) -> None:
        self.order, self.device = order, device
        self.tensors = data.tensors if isinstance(data, TensorDataset) and workers == 0 and collate is None else None
        self.keys = _StepKeys(order)
        self.loader = DataLoader(
            SeededSamples(data, seed),
            batch_sampler=self.keys,
            num_workers=workers,
            collate_fn=collate or default_collate,
            pin_memory=device.type == "cuda",
            persistent_workers=workers > 0,
            generator=torch.Generator().manual_seed(seed),  # its workers' seeds: never drawn from torch's own RNG
        )
        self._stream: Iterator[Batch] | None = None
        self._next_step = -1

    def step(self, step: int) -> list[Batch]:
        """The `accumulation` micro-batches step `step` trains on."""
        if self.tensors is not None:
            batches = [tuple(t[i] for t in self.tensors) for i in self.order.micro_batches(step, step + 1)]
            return [to_device(batch, self.device) for batch in batches]
        if self._stream is None or step != self._next_step or step % self.order.steps_per_epoch == 0:
            self.keys.first_step = step  # a new epoch, or a jump (a resume)
            self._stream = iter(self.loader)
        self._next_step = step + 1
        with user_code("train_data"):  # the data set's __getitem__ and the collate function
            return [to_device(next(self._stream), self.device) for _ in range(self.order.accumulation)]


def eval_batches(
    data: Dataset[Any],
    batch_size: int,
    replicas: int,
    rank: int,
    *,
    workers: int = 0,
    collate: Callable[[list[Any]], Batch] | None = None,
) -> DataLoader[Any]:
    """This replica's share of the evaluation set (every replicas-th sample, none twice), in order."""
    share = list(range(rank, length(data), replicas))
    batches = [share[start : start + batch_size] for start in range(0, len(share), batch_size)]
    return DataLoader(
        data,
        batch_sampler=batches,
        num_workers=workers,
        collate_fn=collate or default_collate,
        generator=torch.Generator().manual_seed(rank),  # leaves torch's own RNG (dropout's) alone
    )
