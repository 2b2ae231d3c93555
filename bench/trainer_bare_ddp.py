"""The benchmark's baseline: a bare DDP script, launched by torchrun, on the built-in synthetic workload.

It shares only the model and the data with the trainer (trainer.workloads); the loop is plain PyTorch.
Usage: torchrun trainer_bare_ddp.py STEPS BATCH_SIZE LEARNING_RATE SEED  (prints one JSON line on rank 0)
"""

import json
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import Dataset
from torch.utils.data.distributed import DistributedSampler

from trainer.config import Workload
from trainer.workloads import build_model, load_dataset

WARMUP_STEPS = 5


def main(steps: int, batch_size: int, learning_rate: float, seed: int) -> None:
    """Train for `steps` and report steps per second after the warm-up, measured like the trainer does."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    data = load_dataset(Workload.SYNTHETIC)
    torch.manual_seed(seed)
    model = DistributedDataParallel(build_model(Workload.SYNTHETIC))
    optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate, momentum=0.9)
    samples: Dataset[int] = range(len(data.y_train))  # type: ignore[assignment]
    sampler: DistributedSampler[int] = DistributedSampler(
        samples, num_replicas=world, rank=rank, shuffle=True, seed=seed, drop_last=True
    )
    per_epoch = len(sampler) // batch_size
    started, last, step = 0.0, 0.0, 0
    durations: list[float] = []
    while step < steps:
        sampler.set_epoch(step // per_epoch)
        order = torch.tensor(list(sampler), dtype=torch.long)
        for position in range(step % per_epoch, per_epoch):
            batch = order[position * batch_size : (position + 1) * batch_size]
            optimizer.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(model(data.x_train[batch]), data.y_train[batch])
            loss.backward()  # type: ignore[no-untyped-call]
            optimizer.step()
            step += 1
            now = time.perf_counter()
            if step == WARMUP_STEPS:
                started = now
            elif step > WARMUP_STEPS:
                durations.append(now - last)
            last = now
            if step == steps:
                break
    if rank == 0:
        rates = {"stepsPerSecond": (steps - WARMUP_STEPS) / (last - started)}
        rates["medianStepsPerSecond"] = 1.0 / statistics.median(durations)
        print(json.dumps({**rates, "loss": float(loss.item())}))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]))
