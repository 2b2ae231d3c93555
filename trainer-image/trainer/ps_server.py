"""A parameter server: one shard, workers' gradients applied asynchronously, checkpoints, a clean end."""

import asyncio
import contextlib
import logging
import time
from typing import Any

import torch

from trainer.checkpoint import Checkpointer, checkpoint_root
from trainer.config import TrainerConfig
from trainer.contract import ExitCode
from trainer.env import TrainerEnv
from trainer.failures import RetryableError
from trainer.ps_shard import ShardState, assign_shards
from trainer.ps_wire import Message, encode, read_message
from trainer.signals import StopFlag
from trainer.training import configure_determinism
from trainer.workloads import build_model

log = logging.getLogger(__name__)

WATCH_INTERVAL = 0.1


def shard_params(config: TrainerConfig, index: int, shards: int) -> dict[str, torch.Tensor]:
    """The initial values of the parameters shard `index` owns."""
    model = build_model(config.workload, config.seed)
    named = dict(model.named_parameters())
    assignment = assign_shards([(name, p.numel()) for name, p in named.items()], shards)
    return {name: p.detach() for name, p in named.items() if assignment[name] == index}


class ParameterServer:
    """One shard behind an asyncio TCP server; no request ever waits on another worker, except wait_done."""

    def __init__(self, env: TrainerEnv, config: TrainerConfig, stop: StopFlag) -> None:
        self.env, self.stop = env, stop
        self.index = env.replica_index
        self.shard = ShardState(shard_params(config, self.index, len(env.ps_addrs)), config)
        self.checkpointer = Checkpointer(
            checkpoint_root(env.checkpoint, f"ps-{self.index}"), asynchronous=config.async_checkpoint
        )
        self.done_workers: set[int] = set()
        self.all_done = asyncio.Event()
        self.finished = asyncio.Event()
        self.last_message_at = time.monotonic()

    def resume(self) -> None:
        """Continue from this shard's newest complete checkpoint, if any."""
        state = self.checkpointer.load_latest()
        if state is not None:
            self.shard.load_state_dict(state["shard"])
            self.done_workers = set(state["done_workers"])

    def save(self) -> None:
        """Checkpoint the shard, keyed by its version."""
        state = {"shard": self.shard.state_dict(), "done_workers": sorted(self.done_workers)}
        self.checkpointer.save(self.shard.version, state)

    def _reply_params(self, **fields: Any) -> Message:
        return {"op": "params", "params": self.shard.values(), "version": self.shard.version, **fields}

    def _mark_done(self, worker: int) -> None:
        self.done_workers.add(worker)
        if len(self.done_workers) >= self.env.num_workers:
            self.all_done.set()

    def stats(self) -> Message:
        """Counters, plus who is done."""
        return {"op": "stats", "stats": self.shard.stats.as_dict(), "done": sorted(self.done_workers)}

    async def dispatch(self, message: Message) -> Message:
        """Answer one request."""
        op, worker = message["op"], int(message.get("worker", -1))
        if op == "hello":
            log.info("worker %d connected (next step %d)", worker, self.shard.next_step(worker))
            return self._reply_params(next_step=self.shard.next_step(worker))
        if op == "push":
            result = self.shard.apply(worker, int(message["step"]), int(message["version"]), message["grads"])
            if self.checkpointer.is_step_due(self.shard.version) and result.accepted:
                self.save()
            return self._reply_params(accepted=result.accepted, staleness=result.staleness)
        if op == "pull":
            return self._reply_params()
        if op == "done":
            self._mark_done(worker)
            return self.stats()
        if op == "wait_done":
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.all_done.wait(), timeout=float(message["timeout"]))
            return self.stats()
        if op == "finish":
            self.finished.set()
            return {"op": "bye"}
        raise ValueError(f"unknown op {op!r}")

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve one worker connection until it closes or breaks."""
        try:
            while (message := await read_message(reader)) is not None:
                self.last_message_at = time.monotonic()
                writer.write(encode(await self.dispatch(message)))
                await writer.drain()
        except (ConnectionError, ValueError) as error:
            log.warning("dropping a worker connection: %s", error)
        finally:
            writer.close()

    async def watch(self) -> ExitCode:
        """Wait for the end: finish, SIGTERM, all done and nobody asking, or silence past the deadline."""
        deadline = self.env.master_wait_seconds
        while True:
            await asyncio.sleep(WATCH_INTERVAL)
            quiet = time.monotonic() - self.last_message_at
            if self.finished.is_set() or (self.all_done.is_set() and quiet >= deadline):
                return ExitCode.SUCCEEDED
            if self.stop.is_set():
                return ExitCode.PREEMPTED
            if quiet >= deadline:
                raise RetryableError(f"no worker contacted parameter server {self.index} for {deadline:g}s")
            if self.checkpointer.is_time_due():
                self.save()

    async def serve(self) -> ExitCode:
        """Run the server until watch() says the job is over, then write the final checkpoint."""
        self.resume()
        port = self.env.ps_addrs[self.index][1]
        server = await asyncio.start_server(self.handle, host="0.0.0.0", port=port, reuse_address=True)
        log.info("parameter server %d serving %d tensors on port %d", self.index, len(self.shard.params), port)
        try:
            code = await self.watch()
        finally:
            server.close()
            self.save()
            self.checkpointer.wait()
            log.info("parameter server %d: version %d, %s", self.index, self.shard.version, self.shard.stats)
        return code


def run_parameter_server(env: TrainerEnv, config: TrainerConfig, stop: StopFlag) -> ExitCode:
    """The `ps` role's entry point."""
    configure_determinism()
    return asyncio.run(ParameterServer(env, config, stop).serve())
