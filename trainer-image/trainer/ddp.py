"""DDP training of a recipe: one process per rank, gloo on CPU, NCCL when CUDA is there. Ranks share only tensors:
what is not a gradient goes as bytes read back as data (trainer/collectives.py), never as pickled objects."""

import logging
import os
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import PrefixStore, Store, TCPStore
from torch.nn.parallel import DistributedDataParallel

from trainer import faults
from trainer.checkpoint import Checkpointer
from trainer.collectives import all_gather_bytes, all_gather_json, broadcast_bytes, from_bytes, to_bytes
from trainer.config import TrainerConfig
from trainer.contract import CHECKPOINT_DIR, JOB_KEY_FILE, ExitCode
from trainer.data import DataOrder
from trainer.entrypoint import build_recipe
from trainer.env import TrainerEnv
from trainer.failures import ConfigError, RetryableError
from trainer.pacing import WARMUP_STEPS, AgreementSchedule, StepTimer
from trainer.ps_auth import read_job_key
from trainer.recipe import Recipe
from trainer.rendezvous import wait_for_port
from trainer.reporting import RunReport, checkpoint_pacing
from trainer.signals import StopFlag
from trainer.signed_store import SignedStore
from trainer.steps import accumulate_gradients, evaluate_share, means
from trainer.training import (
    build_optimizer,
    build_scheduler,
    configure_determinism,
    rng_state,
    set_rng_state,
    total_steps,
    train_batches,
)

log = logging.getLogger(__name__)
_STORES_IN_USE: list[Store] = []  # this process' rendezvous stores, alive as long as the process


def init_process_group(env: TrainerEnv) -> torch.device:
    """Join the job's process group (waiting for rank 0's port first) and pick this rank's device."""
    if env.rank != 0:
        wait_for_port(env.master_addr, env.master_port, env.master_wait_seconds, "rank 0 (MASTER_ADDR)")
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", env.local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    backend, timeout = "nccl" if cuda else "gloo", timedelta(seconds=max(120.0, env.master_wait_seconds))
    # Under torchrun the agent already serves the store on MASTER_PORT: join it through env://.
    under_torchrun = "TORCHELASTIC_RUN_ID" in os.environ
    store = None if under_torchrun else attempt_store(env, timeout)
    if store is not None:
        # The process group holds a store written in Python (SignedStore) only through its C++ part: without a
        # reference here Python frees it, and with it rank 0's TCPStore server, while the others still use it.
        _STORES_IN_USE.append(store)
    dist.init_process_group(
        backend,
        init_method="env://" if under_torchrun else None,
        store=store,
        rank=env.rank,
        world_size=env.world_size,
        timeout=timeout,
    )
    log.info("rank %d of %d on %s (%s, attempt %d)", env.rank, env.world_size, device, dist.get_backend(), env.attempt)
    return device


def attempt_store(env: TrainerEnv, timeout: timedelta) -> Store:
    """Rank 0's TCPStore on MASTER_PORT (the others join it), every key under `attempt-N/`: a process of another
    attempt that reaches this store (one that outlived its attempt) looks for its peers under its own prefix, never
    meets this attempt's ranks, and times out. The store does not wait for a count of clients (a stray client
    would count). Its values are signed with the job key (trainer/signed_store.py) when the pod has it, as every
    pod the operator or local mode makes does."""
    store = TCPStore(
        env.master_addr,
        env.master_port,
        env.world_size,
        is_master=env.rank == 0,
        timeout=timeout,
        wait_for_workers=False,
        multi_tenant=True,
    )
    prefixed = PrefixStore(f"attempt-{env.attempt}", store)
    if env.job_key_file is None:
        log.warning("no job key (%s): the rendezvous store's values are not signed", JOB_KEY_FILE)
        return prefixed
    return SignedStore(prefixed, read_job_key(env.job_key_file), env.attempt)


def run_ddp_rank(env: TrainerEnv, config: TrainerConfig, stop: StopFlag) -> ExitCode:
    """Train this rank to the end (SUCCEEDED) or to a SIGTERM (PREEMPTED); peer failures are retryable."""
    configure_determinism()
    recipe = build_recipe(config)
    try:
        device = init_process_group(env)
    except (RuntimeError, TimeoutError) as error:
        raise RetryableError(f"rendezvous with rank 0 failed: {error}") from error
    report = RunReport(env, is_reporter=env.rank == 0)
    try:
        return DdpTrainer(env, config, recipe, stop, device=device, report=report).run()
    except RuntimeError as error:
        raise RetryableError(f"training failed (a peer rank died or the network broke): {error}") from error
    finally:
        report.close()
        dist.destroy_process_group()


def resumed_step(state: dict[str, Any], order: DataOrder) -> int:
    """The step a checkpoint resumes at. Its data position (epoch, global sample offset) is where that step starts
    in this run's order whatever the world size now, as the global batch is the job's; a checkpoint of another
    global batch (another job's, another batchSize) resumes at its step, its samples from this run's order."""
    step = int(state["step"])
    data = state.get("data")
    if data is not None and (data["global_batch"], data["epoch"], data["offset"]) != (
        order.global_batch,
        *order.position(step),
    ):
        log.warning(
            "the checkpoint of step %d was at sample %d of epoch %d with a global batch of %d; this run's global"
            " batch is %d: step %d's samples come from this run's order",
            step,
            data["offset"],
            data["epoch"],
            data["global_batch"],
            order.global_batch,
            step,
        )
    return step


class DdpTrainer:
    """The state of one DDP rank, checkpointable as a whole, and the loop that advances it."""

    def __init__(
        self,
        env: TrainerEnv,
        config: TrainerConfig,
        recipe: Recipe,
        stop: StopFlag,
        *,
        device: torch.device,
        report: RunReport,
    ) -> None:
        self.env, self.config, self.recipe, self.stop, self.device = env, config, recipe, stop, device
        self.report = report
        self.batches = train_batches(
            recipe, config, device, replicas=env.world_size, rank=env.rank, full_replicas=env.desired_world_size
        )
        self.total = total_steps(config, self.batches.order.steps_per_epoch)
        self.module = recipe.model.to(device)
        self.optimizer = build_optimizer(recipe, self.module.parameters())
        self.scheduler = build_scheduler(recipe, self.optimizer, self.total)
        self.checkpointer = Checkpointer(env.checkpoint, asynchronous=config.async_checkpoint, attempt=env.attempt)
        self.step = 0

    def state(self, rng_states: list[Any]) -> dict[str, Any]:
        """Everything a resume needs: model, optimizer, LR schedule, every rank's RNG state, the step and where the
        data stands (epoch, global sample offset, global batch): any world size resumes from it."""
        epoch, offset = self.batches.order.position(self.step)
        return {
            "model": self.module.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
            "rng": rng_states,
            "world_size": self.env.world_size,
            "step": self.step,
            "data": {"epoch": epoch, "offset": offset, "global_batch": self.batches.order.global_batch},
        }

    def resume(self) -> int:
        """Rank 0 reads the newest complete checkpoint and shares it: every rank resumes from the same one."""
        state = self.checkpointer.load_latest() if self.env.rank == 0 else None
        shared = broadcast_bytes(to_bytes(state) if state is not None else b"", self.device)
        if self.env.rank != 0 and shared:
            state = from_bytes(shared)
        if state is None:
            return 0
        try:
            self.module.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
            if self.scheduler is not None and state.get("scheduler") is not None:
                self.scheduler.load_state_dict(state["scheduler"])
        except (RuntimeError, ValueError, KeyError) as error:
            problem = f"the newest checkpoint does not fit the recipe's model: {error}"
            raise ConfigError(CHECKPOINT_DIR, "model", problem) from None
        if state["world_size"] == self.env.world_size:
            set_rng_state(state["rng"][self.env.rank])
        else:
            log.warning(
                "world size changed from %d to %d: RNG state not restored", state["world_size"], self.env.world_size
            )
        self.step = resumed_step(state, self.batches.order)
        return self.step

    def save(self) -> None:
        """A collective: every rank hands its RNG state to rank 0, which writes the checkpoint."""
        if not self.checkpointer.enabled:
            return
        gathered = all_gather_bytes(to_bytes(rng_state()), self.device)
        if self.env.rank != 0:
            return
        self.checkpointer.save(self.step, self.state([from_bytes(part) for part in gathered]))
        self.report.checkpointed(self.checkpointer)

    def agree(self, schedule: AgreementSchedule) -> tuple[bool, bool]:
        """All ranks agree on (stop now, a time-based checkpoint is due) and on when to agree next.

        Any rank's SIGTERM stops all; the slowest rank's step time sets the next agreement step on every rank.
        """
        flags = torch.tensor(
            [
                float(self.stop.is_set()),
                float(self.env.rank == 0 and self._checkpoint_due()),
                schedule.seconds_per_step(self.step),
            ],
            device=self.device,
        )
        dist.all_reduce(flags, op=dist.ReduceOp.MAX)
        stop, time_due, slowest_seconds_per_step = flags.tolist()
        schedule.reschedule(self.step, slowest_seconds_per_step)
        return bool(stop), bool(time_due)

    def _checkpoint_due(self) -> bool:
        """Rank 0's say: the time-based rule, or a checkpoint asked for (an elastic job that can grow back)."""
        return self.checkpointer.is_time_due() or self.checkpointer.is_requested(self.step)

    def train_step(self, ddp: DistributedDataParallel) -> float:
        """One optimizer step over this step's micro-batches."""
        batches = self.batches.step(self.step)
        self.optimizer.zero_grad(set_to_none=True)
        divisors = self.batches.order.loss_divisors
        loss = accumulate_gradients(
            ddp, self.recipe, batches, self.config, device=self.device, no_sync=ddp.no_sync, divisors=divisors
        )
        self.optimizer.step()
        if self.scheduler is not None:
            self.scheduler.step()
        self.step += 1
        return loss

    def evaluate(self) -> dict[str, float] | None:
        """A collective: every rank evaluates its share of the evaluation set; the means reach rank 0's report."""
        if self.recipe.eval_data is None:
            return None
        world, rank = self.env.world_size, self.env.rank
        part = evaluate_share(self.module, self.recipe, self.config, self.device, replicas=world, rank=rank)
        metrics = means(all_gather_json(part, self.device))
        self.report.evaluated(self.step, metrics)
        faults.maybe_hold(self.step, rank)
        return metrics

    def run(self) -> ExitCode:
        """Fence older attempts off, resume, train until done or stopped, evaluate and checkpoint on schedule,
        report."""
        if self.env.rank == 0:
            self.checkpointer.raise_fence()
        started_at = self.resume()
        self.report.start(started_at, self.total, **checkpoint_pacing(self.checkpointer))
        self.report.checkpointed(self.checkpointer)  # where it resumed from: the newest complete one on the volume
        ddp = DistributedDataParallel(
            self.module, device_ids=[self.device.index] if self.device.type == "cuda" else None
        )
        samples = self.batches.order.global_batch
        timer = StepTimer(started_at + WARMUP_STEPS)
        schedule = AgreementSchedule(started_at)
        every = self.config.eval_every_steps
        while self.step < self.total:
            loss = self.train_step(ddp)
            if self.step == started_at + 1:
                log.info("attempt %d: first step done (step %d)", self.env.attempt, self.step)
            faults.maybe_kill(self.step, self.env.rank)
            faults.maybe_pause(self.step)
            faults.maybe_delay_step(len(self.batches.order.micro_batch_sizes) / self.batches.order.accumulation)
            timer.at(self.step)
            self.report.stepped(self.step, loss, samples)
            stop, time_due = self.agree(schedule) if schedule.is_due(self.step) else (False, False)
            if stop:
                return self.finish(ExitCode.PREEMPTED, timer)
            # Evaluate before the checkpoint of the same step: a rank lost between the two resumes from the
            # checkpoint before, which evaluates that step again, instead of from this one, which never would.
            if every is not None and self.step % every == 0 and self.step < self.total:
                self.evaluate()
            if self.step < self.total and (time_due or self.checkpointer.is_step_due(self.step)):
                self.save()
        return self.finish(ExitCode.SUCCEEDED, timer)

    def finish(self, code: ExitCode, timer: StepTimer) -> ExitCode:
        """The final checkpoint, the final evaluation (not when stopped: the grace period is for the checkpoint),
        then the final report."""
        self.save()
        self.checkpointer.wait()
        self.report.checkpointed(self.checkpointer)
        if code == ExitCode.SUCCEEDED:
            self.evaluate()
        log.info("rank %d stops at step %d (%s)", self.env.rank, self.step, code.name)
        self.report.update(
            finished=code == ExitCode.SUCCEEDED,
            exitCode=int(code),
            stepsPerSecond=timer.rate(),
            medianStepsPerSecond=timer.median_rate(),
            checkpointStallSeconds=self.checkpointer.stall_seconds,
            checkpointSaves=self.checkpointer.saves,
            **({"etaSeconds": 0.0} if code == ExitCode.SUCCEEDED else {}),
        )
        # Ranks leave together: a rank tearing down its group while a peer still writes aborts in gloo.
        dist.barrier()
        return code
