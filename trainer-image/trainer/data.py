"""Which samples each step trains on, as a pure function of the step, and the batches that carry them.

Every step trains on the same global batch whatever the world size (DataOrder); a replica's share of it comes in
micro-batches of `batch_size` samples, and a step never straddles two epochs. In-memory TensorDatasets are indexed
directly; other data sets go through a DataLoader (workers, pinned memory) whose samples are each loaded under a
seed of their own, so augmentations do not depend on which worker loads a sample or where a run resumed.
"""

import hashlib
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset, default_collate

from trainer.failures import user_code
from trainer.recipe import Batch, length


class DataOrder:
    """The sample indices of every micro-batch of one replica, by step.

    An epoch is one permutation of the data set, drawn from seed + epoch as DistributedSampler draws it. Step s of
    an epoch trains on the global batch at positions [s x G, (s + 1) x G) of it, G = batchSize x
    gradientAccumulationSteps x the job's full world size (`full_replicas`): a step's samples and the steps in an
    epoch do not depend on how many replicas train. Replica r of `replicas` takes positions r, r + replicas, ... of
    the step's global batch, in micro-batches of at most batchSize: at the full world, gradientAccumulationSteps
    micro-batches (DistributedSampler's order exactly); at a smaller world (an elastic job resumed on fewer ranks),
    more, the last of them smaller when the global batch does not divide evenly. Within an epoch no sample is seen
    twice or skipped, whatever worlds its steps ran at.
    """

    def __init__(
        self,
        samples: int,
        micro_batch: int,
        accumulation: int,
        *,
        replicas: int,
        rank: int,
        seed: int,
        full_replicas: int | None = None,
    ) -> None:
        full = replicas if full_replicas is None else full_replicas
        if not 0 <= rank < replicas <= full:
            raise ValueError(f"rank {rank} of {replicas} replicas does not fit a job of {full}")
        self.samples, self.seed, self.replicas, self.rank = samples, seed, replicas, rank
        self.micro_batch, self.accumulation = micro_batch, accumulation
        self.global_batch = micro_batch * accumulation * full
        self.steps_per_epoch = samples // self.global_batch
        if self.steps_per_epoch == 0:
            raise ValueError(
                f"batchSize {micro_batch} x gradientAccumulationSteps {accumulation} is larger than a replica's "
                f"share of the training data ({samples // full} samples of {samples}, over {full} processes)"
            )
        share = len(range(rank, self.global_batch, replicas))
        self.micro_batch_sizes = tuple(min(micro_batch, share - start) for start in range(0, share, micro_batch))
        """The sample count of each of this replica's micro-batches in every step."""
        self.loss_divisors = tuple(self.global_batch / (size * replicas) for size in self.micro_batch_sizes)
        """What each micro-batch's mean loss is divided by, so that the gradient DDP averages over the replicas is
        the mean over the global batch: G / (its samples x replicas), gradientAccumulationSteps at the full world."""
        self._epoch = -1
        self._permutation = torch.empty(0, dtype=torch.long)

    def epoch_of(self, step: int) -> int:
        """The epoch a step belongs to."""
        return step // self.steps_per_epoch

    def position(self, step: int) -> tuple[int, int]:
        """Where step `step` starts: (epoch, global sample offset into the epoch's permutation)."""
        epoch, within = divmod(step, self.steps_per_epoch)
        return epoch, within * self.global_batch

    def step_at(self, epoch: int, offset: int) -> int:
        """The step that starts at global sample `offset` of `epoch`; a ValueError if no step starts there."""
        within, rest = divmod(offset, self.global_batch)
        if rest or not 0 <= within < self.steps_per_epoch or epoch < 0:
            raise ValueError(f"no step starts at sample {offset} of epoch {epoch} (global batch {self.global_batch})")
        return epoch * self.steps_per_epoch + within

    def permutation(self, epoch: int) -> torch.Tensor:
        """Every sample index in `epoch`'s order (the whole data set's, as DistributedSampler shuffles it)."""
        if epoch != self._epoch:
            generator = torch.Generator()
            generator.manual_seed(self.seed + epoch)
            self._permutation = torch.randperm(self.samples, generator=generator)
            self._epoch = epoch
        return self._permutation

    def step_indices(self, step: int) -> torch.Tensor:
        """This replica's sample indices of step `step`, in training order."""
        epoch, offset = self.position(step)
        batch = self.permutation(epoch)[offset : offset + self.global_batch]
        return batch[self.rank :: self.replicas]

    def micro_batches(self, step: int, end_step: int | None = None) -> Iterator[torch.Tensor]:
        """The micro-batches of steps [step, end_step) of one epoch (the rest of step's epoch by default)."""
        epoch = self.epoch_of(step)
        last = (epoch + 1) * self.steps_per_epoch if end_step is None else end_step
        for each in range(step, last):
            share = self.step_indices(each)
            for start in range(0, len(share), self.micro_batch):
                yield share[start : start + self.micro_batch]


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
        return left * len(self.order.micro_batch_sizes)


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
            return [to_device(next(self._stream), self.device) for _ in self.order.micro_batch_sizes]


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
