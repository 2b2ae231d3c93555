"""DDP training of the built-in workloads: one process per rank, gloo on CPU, NCCL when CUDA is there."""

import logging
import os
import statistics
import time
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from trainer import faults
from trainer.checkpoint import Checkpointer
from trainer.config import TrainerConfig
from trainer.contract import ExitCode
from trainer.env import TrainerEnv
from trainer.failures import ConfigError, RetryableError
from trainer.progress import ProgressReporter
from trainer.rendezvous import wait_for_port
from trainer.signals import StopFlag
from trainer.training import (
    DataOrder,
    build_optimizer,
    compute_loss,
    configure_determinism,
    rng_state,
    set_rng_state,
    total_steps,
)
from trainer.workloads import accuracy, build_model, load_dataset

log = logging.getLogger(__name__)

CONTROL_EVERY = 10  # the most steps between two agreements: fast steps pay for one tiny all-reduce per ten
CONTROL_SECONDS = 1.0  # about the most wall time between two: slow steps agree more often, down to every step
WARMUP_STEPS = 5


def init_process_group(env: TrainerEnv) -> torch.device:
    """Join the job's process group (waiting for rank 0's port first) and pick this rank's device."""
    if env.rank != 0:
        wait_for_port(env.master_addr, env.master_port, env.master_wait_seconds, "rank 0 (MASTER_ADDR)")
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", env.local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    # Under torchrun the agent already serves the store on MASTER_PORT: join it through env://.
    under_torchrun = "TORCHELASTIC_RUN_ID" in os.environ
    dist.init_process_group(
        "nccl" if cuda else "gloo",
        init_method="env://" if under_torchrun else f"tcp://{env.master_addr}:{env.master_port}",
        rank=env.rank,
        world_size=env.world_size,
        timeout=timedelta(seconds=max(120.0, env.master_wait_seconds)),
    )
    return device


def run_ddp_rank(env: TrainerEnv, config: TrainerConfig, stop: StopFlag) -> ExitCode:
    """Train this rank to the end (SUCCEEDED) or to a SIGTERM (PREEMPTED); peer failures are retryable."""
    configure_determinism()
    try:
        device = init_process_group(env)
    except (RuntimeError, TimeoutError) as error:
        raise RetryableError(f"rendezvous with rank 0 failed: {error}") from error
    progress = None
    try:
        if env.rank == 0:
            progress = ProgressReporter(env.attempt, env.progress_port, env.progress_file).start()
        return DdpTrainer(env, config, stop, device, progress).run()
    except RuntimeError as error:
        raise RetryableError(f"training failed (a peer rank died or the network broke): {error}") from error
    finally:
        if progress is not None:
            progress.close()
        dist.destroy_process_group()


class DdpTrainer:
    """The state of one DDP rank, checkpointable as a whole, and the loop that advances it."""

    def __init__(
        self,
        env: TrainerEnv,
        config: TrainerConfig,
        stop: StopFlag,
        device: torch.device,
        progress: ProgressReporter | None,
    ) -> None:
        self.env, self.config, self.stop, self.device, self.progress = env, config, stop, device, progress
        data = load_dataset(config.workload)
        self.x, self.y = data.x_train.to(device), data.y_train.to(device)
        self.x_test, self.y_test = data.x_test.to(device), data.y_test.to(device)
        try:
            self.order = DataOrder(len(self.y), config.batch_size, env.world_size, env.rank, config.seed)
        except ValueError as error:
            raise ConfigError("TJ_TRAINER_CONFIG", "batchSize", str(error)) from None
        self.total = total_steps(config, self.order.steps_per_epoch)
        self.module = build_model(config.workload, config.seed).to(device)
        self.optimizer = build_optimizer(config, self.module.parameters())
        self.checkpointer = Checkpointer(env.checkpoint, asynchronous=config.async_checkpoint)
        self.step = 0

    def state(self, rng_states: list[Any]) -> dict[str, Any]:
        """Everything a resume needs: model, optimizer, data order, every rank's RNG state, the step."""
        epoch, position = self.order.position(self.step)
        return {
            "model": self.module.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "epoch": epoch,
            "position": position,
            "rng": rng_states,
            "world_size": self.env.world_size,
            "step": self.step,
        }

    def resume(self) -> int:
        """Rank 0 reads the newest complete checkpoint and shares it: every rank resumes from the same one."""
        holder: list[Any] = [self.checkpointer.load_latest() if self.env.rank == 0 else None]
        dist.broadcast_object_list(holder, src=0)
        state = holder[0]
        if state is None:
            return 0
        self.module.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if state["world_size"] == self.env.world_size:
            set_rng_state(state["rng"][self.env.rank])
        else:
            log.warning("world size changed from %d: RNG state not restored", state["world_size"])
        self.step = state["epoch"] * self.order.steps_per_epoch + state["position"]
        return self.step

    def save(self) -> None:
        """A collective: every rank hands its RNG state to rank 0, which writes the checkpoint."""
        if not self.checkpointer.enabled:
            return
        rng_states: list[Any] = [None] * self.env.world_size
        dist.all_gather_object(rng_states, rng_state())
        if self.env.rank != 0:
            return
        self.checkpointer.save(self.step, self.state(rng_states))
        if self.progress is not None and self.checkpointer.last is not None:
            last = self.checkpointer.last
            self.progress.checkpointed(last.step, last.path, last.time)

    def agree(self, schedule: "AgreementSchedule") -> tuple[bool, bool]:
        """All ranks agree on (stop now, a time-based checkpoint is due) and on when to agree next.

        Any rank's SIGTERM stops all; the slowest rank's step time sets the next agreement step on every rank.
        """
        flags = torch.tensor(
            [
                float(self.stop.is_set()),
                float(self.env.rank == 0 and self.checkpointer.is_time_due()),
                schedule.seconds_per_step(self.step),
            ],
            device=self.device,
        )
        dist.all_reduce(flags, op=dist.ReduceOp.MAX)
        stop, time_due, slowest_seconds_per_step = flags.tolist()
        schedule.reschedule(self.step, slowest_seconds_per_step)
        return bool(stop), bool(time_due)

    def train_step(self, ddp: DistributedDataParallel) -> float:
        """One optimizer step on the batch this step's data order names."""
        batch = self.order.batch(*self.order.position(self.step))
        self.optimizer.zero_grad(set_to_none=True)
        loss = compute_loss(ddp, self.x[batch], self.y[batch])
        loss.backward()  # type: ignore[no-untyped-call]
        self.optimizer.step()
        self.step += 1
        return float(loss.item())

    def run(self) -> ExitCode:
        """Resume, train until done or stopped, checkpoint, report."""
        started_at = self.resume()
        if self.progress is not None:
            self.progress.update(resumedFromStep=started_at, totalSteps=self.total, step=started_at)
        ddp = DistributedDataParallel(
            self.module, device_ids=[self.device.index] if self.device.type == "cuda" else None
        )
        samples = self.config.batch_size * self.env.world_size
        timer = _Timer(started_at + WARMUP_STEPS)
        schedule = AgreementSchedule(started_at)
        while self.step < self.total:
            loss = self.train_step(ddp)
            faults.maybe_kill(self.step, self.env.rank)
            faults.maybe_pause(self.step)
            faults.maybe_delay_step()
            timer.at(self.step)
            if self.progress is not None:
                self.progress.report(self.step, loss, samples)
            stop, time_due = self.agree(schedule) if schedule.is_due(self.step) else (False, False)
            if stop:
                return self.finish(ExitCode.PREEMPTED, timer)
            if self.step < self.total and (time_due or self.checkpointer.is_step_due(self.step)):
                self.save()
        return self.finish(ExitCode.SUCCEEDED, timer)

    def finish(self, code: ExitCode, timer: "_Timer") -> ExitCode:
        """The final checkpoint, then the final report: accuracy, throughput, checkpoint stall."""
        self.save()
        self.checkpointer.wait()
        if self.progress is not None and self.checkpointer.last is not None:
            last = self.checkpointer.last
            self.progress.checkpointed(last.step, last.path, last.time)
        if self.progress is not None:
            score = accuracy(self.module, self.x_test, self.y_test)
            log.info("rank 0 stops at step %d (%s): test accuracy %.4f", self.step, code.name, score)
            self.progress.update(
                accuracy=score,
                finished=code == ExitCode.SUCCEEDED,
                exitCode=int(code),
                stepsPerSecond=timer.rate(),
                medianStepsPerSecond=timer.median_rate(),
                checkpointStallSeconds=self.checkpointer.stall_seconds,
                checkpointSaves=self.checkpointer.saves,
            )
        # Ranks leave together: a rank tearing down its group while a peer still writes aborts in gloo.
        dist.barrier()
        return code


class AgreementSchedule:
    """When the ranks agree next: at most CONTROL_EVERY steps and about CONTROL_SECONDS after the last agreement.

    A SIGTERM is thus acted on within about a second (or one step, if slower), however slow the steps are.
    """

    def __init__(self, step: int) -> None:
        self.next_step = step + 1
        self._since_step, self._since = step, time.monotonic()

    def is_due(self, step: int) -> bool:
        return step >= self.next_step

    def seconds_per_step(self, step: int) -> float:
        """This rank's mean step time since the last agreement."""
        return (time.monotonic() - self._since) / max(1, step - self._since_step)

    def reschedule(self, step: int, slowest_seconds_per_step: float) -> None:
        """Every rank passes the same all-reduced step time, so every rank picks the same next step."""
        steps = int(CONTROL_SECONDS / max(slowest_seconds_per_step, 1e-6))
        self.next_step = step + min(CONTROL_EVERY, max(1, steps))
        self._since_step, self._since = step, time.monotonic()


class _Timer:
    """Steps per second after a warm-up (mean and median), measured like the benchmark's bare script."""

    def __init__(self, from_step: int) -> None:
        self.from_step = from_step
        self.start: float | None = None
        self.last_step = from_step
        self.end = 0.0
        self.durations: list[float] = []

    def at(self, step: int) -> None:
        now = time.perf_counter()
        if step == self.from_step:
            self.start = now
        elif self.start is not None:
            self.durations.append(now - self.end)
        self.last_step, self.end = step, now

    def rate(self) -> float | None:
        if self.start is None or self.last_step <= self.from_step:
            return None
        return (self.last_step - self.from_step) / (self.end - self.start)

    def median_rate(self) -> float | None:
        return 1.0 / statistics.median(self.durations) if self.durations else None
