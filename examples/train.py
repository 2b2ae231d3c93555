"""Fit a line with DDP over gloo: every process trains on its shard and the gradients are averaged."""

import argparse

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)
    args = parser.parse_args()
    dist.init_process_group("gloo")  # torchrun set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    features = torch.randn(512, 8)
    targets = features @ torch.randn(8, 1)
    model = DistributedDataParallel(nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(args.epochs):
        for _ in range(100):
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(features[rank::world]), targets[rank::world])
            loss.backward()
            optimizer.step()
        print(f"rank {rank} of {world}: epoch {epoch} loss {loss.item():.5f}", flush=True)
    dist.barrier()  # every rank's last all-reduce is done before any rank tears gloo down (else: terminate, -6)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
