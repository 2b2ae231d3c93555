"""A user's own torchrun-style script that uses trainer.helpers: resume, checkpoints, progress, SIGTERM."""

import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from trainer import helpers


def main(steps: int) -> int:
    """Fit a tiny linear model for `steps`, resuming from the platform's newest complete checkpoint."""
    torch.set_num_threads(1)
    env = helpers.environment()
    helpers.init_distributed(env)
    checkpoints, progress, stop = helpers.checkpointer(env), helpers.progress_reporter(env), helpers.stop_flag()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    state = checkpoints.load_latest()
    step = 0
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step = state["step"]
    started, ddp = step, DistributedDataParallel(model)
    generator = torch.Generator().manual_seed(env.rank)
    while step < steps and not stop.is_set():
        x = torch.randn(8, 4, generator=generator)
        loss = (ddp(x) - x.sum(dim=1, keepdim=True)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        if progress is not None:
            progress.report(step, float(loss.item()), 8 * env.world_size)
    helpers.save(checkpoints, env, step, {"model": model.state_dict(), "optimizer": optimizer.state_dict()})
    checkpoints.wait()
    if progress is not None:
        progress.update(resumedFromStep=started, worldSize=env.world_size, finished=step >= steps)
        progress.close()
    dist.barrier()
    dist.destroy_process_group()
    return int(helpers.ExitCode.PREEMPTED if stop.is_set() else helpers.ExitCode.SUCCEEDED)


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
