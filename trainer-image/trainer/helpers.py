"""What a user's own torchrun-style script can import: rendezvous, checkpoints, progress, SIGTERM, exit codes.

from trainer import helpers
env = helpers.environment()
device = helpers.init_distributed(env)
checkpointer, progress, stop = helpers.checkpointer(env), helpers.progress_reporter(env), helpers.stop_flag()
state = checkpointer.load_latest()  # None on a fresh start
...
if checkpointer.is_step_due(step): helpers.save(checkpointer, env, step, {...})
if stop.is_set(): helpers.save(...); sys.exit(helpers.ExitCode.PREEMPTED)

With `checkpoint.everySteps: Auto` (or everySeconds) the interval is in seconds, so ranks could disagree about when
it is up: rank 0's checkpointer decides, and every rank follows it, every few steps, e.g.
    due = torch.tensor([float(env.rank == 0 and checkpointer.is_time_due())], device=device)
    torch.distributed.broadcast(due, src=0)
    if due.item(): helpers.save(checkpointer, env, step, {...})
Auto's interval (TJ_CHECKPOINT_PACING) starts short, to measure what a save costs, then follows the Young/Daly rule
sqrt(2 x save stall x mean time between failures) after every save; checkpointer.pacing_report() says what it picked.

env.attempt is TJ_ATTEMPT, the job's attempt this process belongs to. Under the in-place agent (TJ_IN_PLACE=1) a
restart inside the same pod is a new attempt with a new TJ_ATTEMPT: init_distributed joins only that attempt's
ranks, and once rank 0's checkpointer exists, an older attempt's process can no longer write checkpoints.
"""

import os
from typing import Any

import torch

from trainer.checkpoint import Checkpointer, SavedCheckpoint
from trainer.checkpoint_cleanup import clear_checkpoints
from trainer.contract import ExitCode
from trainer.ddp import init_process_group
from trainer.env import CheckpointPolicy, TrainerEnv, read_env
from trainer.progress_endpoint import ProgressReporter
from trainer.signals import StopFlag
from trainer.training import rng_state, set_rng_state

__all__ = [
    "Checkpointer",
    "ExitCode",
    "ProgressReporter",
    "SavedCheckpoint",
    "StopFlag",
    "checkpointer",
    "environment",
    "init_distributed",
    "progress_reporter",
    "rng_state",
    "save",
    "set_rng_state",
    "stop_flag",
]


def environment() -> TrainerEnv:
    """The operator's variables (or torchrun's: RANK, LOCAL_RANK, WORLD_SIZE, MASTER_*), validated."""
    return read_env(os.environ)


def init_distributed(env: TrainerEnv) -> torch.device:
    """Wait for rank 0's port (non-zero ranks), join the process group, return this rank's device."""
    return init_process_group(env)


def checkpointer(env: TrainerEnv, asynchronous: bool = False) -> Checkpointer:
    """The platform's checkpointer from TJ_CHECKPOINT_*; every rank can read, only rank 0 should save. On rank 0 it
    raises the attempt fence (TJ_ATTEMPT): a process of an older attempt can no longer write checkpoints."""
    policy = env.checkpoint if env.checkpoint.directory is not None else CheckpointPolicy()
    checkpoints = Checkpointer(policy, asynchronous=asynchronous, attempt=env.attempt)
    if env.rank == 0:
        checkpoints.raise_fence()
    return checkpoints


def save(checkpoints: Checkpointer, env: TrainerEnv, step: int, state: dict[str, Any]) -> None:
    """Save on rank 0 only (the caller keeps ranks in step, e.g. by saving at agreed steps)."""
    if env.rank == 0:
        checkpoints.save(step, state)


def progress_reporter(env: TrainerEnv) -> ProgressReporter | None:
    """Rank 0's progress endpoint and file (TJ_PROGRESS_PORT, TJ_PROGRESS_FILE), started; None elsewhere. A sweep's
    trial first removes the finished trials' checkpoint folders it was told to (TJ_REMOVE_CHECKPOINTS), and its
    report says which are gone."""
    if env.rank != 0:
        return None
    cleared = clear_checkpoints(env)
    reporter = ProgressReporter(env.attempt, env.progress_port, env.progress_file).start()
    if cleared:
        reporter.update(**cleared)
    return reporter


def stop_flag() -> StopFlag:
    """A flag SIGTERM sets: finish the step, save, exit with ExitCode.PREEMPTED."""
    return StopFlag().install()
