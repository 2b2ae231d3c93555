"""A parameter server: one shard, workers' gradients applied asynchronously or in synchronous rounds,
checkpoints, a clean end."""

import asyncio
import contextlib
import logging
import math
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import torch

from trainer.bounded_http import listen_address
from trainer.checkpoint import Checkpointer, SavedCheckpoint, checkpoint_root
from trainer.config import TrainerConfig
from trainer.contract import ExitCode
from trainer.entrypoint import build_recipe
from trainer.env import TrainerEnv
from trainer.failures import RetryableError
from trainer.ps_auth import read_job_key
from trainer.ps_fence import Fence, said
from trainer.ps_shard import SYNC_ROUND_SECONDS, new_shard
from trainer.ps_wire import (
    Message,
    Peer,
    ProtocolError,
    accept_session,
    frame_limit,
    integer_field,
    peer_address,
    read_message,
    write_message,
)
from trainer.signals import StopFlag
from trainer.training import configure_determinism

log = logging.getLogger(__name__)

WATCH_INTERVAL = 0.1
PACING_TELL_SECONDS = 5.0  # how often worker 0 hears this server's checkpoint pacing (it reports for the job)
FIRST_MESSAGE_SECONDS = 30.0
REFUSAL_LOG_SECONDS = 10.0
SPARE_HANDSHAKES = 16  # connections still proving the job's key, beyond two per worker, before new ones are closed
FINAL_ASK_SECONDS = 5.0  # how long a stopped server waits for worker 0 to ask for its final checkpoint


@dataclass
class OpenRound:
    """The synchronous round gradients are being added to: set `closed` once it is applied."""

    closed: asyncio.Event
    deadline: float  # time.monotonic() past which it closes without the workers still missing


class ParameterServer:
    """One shard behind an asyncio TCP server; no request waits on another worker, except wait_done and, with
    stalenessBound 0, a push (until its synchronous round closes)."""

    def __init__(self, env: TrainerEnv, config: TrainerConfig, stop: StopFlag) -> None:
        self.env, self.stop = env, stop
        self.key = read_job_key(env.job_key_file)
        self.index = env.replica_index
        self.shard = new_shard(env, config, build_recipe(config))
        self.limit = frame_limit(self.shard.params)
        self.checkpointer = Checkpointer(
            checkpoint_root(env.checkpoint, f"ps-{self.index}"), asynchronous=config.async_checkpoint
        )
        self.done_workers: set[int] = set()
        self.all_done = asyncio.Event()
        self.finished = asyncio.Event()
        self.started_at = self.last_message_at = time.monotonic()
        self.in_flight = 0
        self.connections: set[asyncio.Task[None]] = set()
        self.handshakes = 0  # connections that have not yet sent an authenticated first message
        self.max_handshakes = 2 * env.num_workers + SPARE_HANDSHAKES
        self.refusal_logged_at = -math.inf
        self.fence = Fence()  # each worker's newest incarnation: an older one's messages are refused
        self.links: Counter[int] = Counter()  # open connections per worker, counted from their hello
        self.last_heard: dict[int, float] = {}
        self.absent: set[int] = set()  # not expected in synchronous rounds until they speak again
        self.open_round: OpenRound | None = None
        self.round_seconds = min(SYNC_ROUND_SECONDS, env.master_wait_seconds)
        self.pacing_told_at: float | None = None  # when worker 0 last heard this server's pacing
        self.checkpoint_told: SavedCheckpoint | None = None  # the last checkpoint worker 0 heard of
        self.final_asked = False  # worker 0 asked for a checkpoint as it stopped (see final_checkpoint)
        self.saved_state: tuple[int, dict[int, int]] | None = None  # version and next steps of the last save

    def resume(self) -> None:
        """Continue from this shard's newest complete checkpoint, if any."""
        state = self.checkpointer.load_latest()
        if state is not None:
            self.shard.load_state_dict(state["shard"])
            self.done_workers = set(state["done_workers"])

    def save(self) -> None:
        """Checkpoint the shard, named by the job's step: worker 0's next step, the step it reports and resumes
        from (the shard's version, which counts every worker's updates, is in the state)."""
        state = {"shard": self.shard.state_dict(), "done_workers": sorted(self.done_workers)}
        self.checkpointer.save(self.shard.next_step(0), state)
        self.saved_state = (self.shard.version, dict(self.shard.next_steps))

    def save_final(self) -> None:
        """The checkpoint a stop ends with: the open synchronous round applied first (as its deadline would), and
        no second write when nothing changed since the last (worker 0 may have asked for it already)."""
        if self.open_round is not None:
            self._close_round()
        if self.saved_state != (self.shard.version, self.shard.next_steps):
            self.save()
        self.checkpointer.wait()

    def _reply_params(self, **fields: Any) -> Message:
        return {"op": "params", "params": self.shard.values(), "version": self.shard.version, **fields}

    def _mark_done(self, worker: int) -> None:
        self.done_workers.add(worker)
        if len(self.done_workers) >= self.env.num_workers:
            self.all_done.set()
        self._close_round_if_complete()

    def stats(self) -> Message:
        """Counters, who is done, and how long the others have been silent (see unfinished_idle)."""
        return {
            "op": "stats",
            "stats": self.shard.stats.as_dict(),
            "done": sorted(self.done_workers),
            "heard": sorted(self.last_heard),
            "idle": self.unfinished_idle(),
        }

    def unfinished_idle(self) -> float:
        """Seconds since a worker that is not done last spoke to this shard (or since it started); 0 if none."""
        unfinished = set(range(self.env.num_workers)) - self.done_workers
        if not unfinished:
            return 0.0
        return time.monotonic() - max(self.last_heard.get(worker, self.started_at) for worker in unfinished)

    async def dispatch(self, peer: Peer, message: Message) -> Message:
        """Answer one authenticated request, or raise ProtocolError (the connection is then dropped)."""
        op = message["op"]
        if op == "hello":
            return self._hello(peer, message)
        worker = self._worker(peer, message)
        self._heard_from(worker)
        if op == "push":
            return await self._push(worker, message)
        if op == "pull":
            return self._reply_params()
        if op == "done":
            self._mark_done(worker)
            return self.stats()
        if op == "wait_done":
            timeout = self._wait_seconds(message)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.all_done.wait(), timeout)
            return self.stats()
        if op in ("finish", "checkpoint") and worker == 0:
            return self._asked_by_worker_0(op)
        raise ProtocolError(f"op {op!r} is not one worker {worker} may send")

    def _asked_by_worker_0(self, op: str) -> Message:
        """What only worker 0 may ask: to release the servers at the end, or a checkpoint as it stops."""
        if op == "checkpoint":
            return self.final_checkpoint()
        self.finished.set()
        return {"op": "bye"}

    def _hello(self, peer: Peer, message: Message) -> Message:
        worker = integer_field(message, "worker", 0, self.env.num_workers - 1)
        if peer.worker not in (None, worker):
            raise ProtocolError(f"a connection of worker {peer.worker} said hello as worker {worker}")
        incarnation = said(message)
        if self.fence.admit(worker, incarnation):
            log.info("worker %d is now %s: its older connections are refused", worker, incarnation)
        peer.incarnation = incarnation
        if peer.worker is None:
            self.links[worker] += 1
        if worker == 0:
            self.pacing_told_at, self.checkpoint_told = None, None  # a restarted worker 0 reports afresh
            self.final_asked = False
        peer.worker = worker
        self._heard_from(worker)
        step = self.shard.next_step(worker)
        log.info("worker %d connected from %s (%s, next step %d)", worker, peer.address, incarnation, step)
        return self._reply_params(next_step=self.shard.next_step(worker), **self._checkpoint_for(worker))

    def _worker(self, peer: Peer, message: Message) -> int:
        """The worker this connection speaks for; a message may not name another."""
        if peer.worker is None:
            raise ProtocolError(f"op {message['op']!r} before hello")
        if "worker" in message:
            integer_field(message, "worker", peer.worker, peer.worker)
        self.fence.check(peer.worker, peer.incarnation)
        return peer.worker

    def _heard_from(self, worker: int) -> None:
        self.last_heard[worker] = time.monotonic()
        self.absent.discard(worker)

    def forget(self, peer: Peer) -> None:
        """A connection closed: a worker left with none open is not waited for until it speaks again."""
        if peer.worker is None:
            return
        self.links[peer.worker] -= 1
        if self.links[peer.worker] <= 0:
            self.absent.add(peer.worker)
            self._close_round_if_complete()

    async def _push(self, worker: int, message: Message) -> Message:
        step, version = integer_field(message, "step"), integer_field(message, "version")
        try:
            grads = self.shard.check_push(worker, step, version, message.get("grads"))
        except ValueError as error:
            raise ProtocolError(str(error)) from None
        if self.shard.synchronous:
            return await self._push_to_round(worker, step, version, grads)
        result = self.shard.apply(worker, step, version, grads)
        if result.accepted:
            self._save_if_due()
        return self._reply_params(accepted=result.accepted, staleness=result.staleness, **self._news_for(worker))

    def _save_if_due(self) -> None:
        if self.checkpointer.is_step_due(self.shard.version):
            self.save()

    async def _push_to_round(self, worker: int, step: int, version: int, grads: dict[str, torch.Tensor]) -> Message:
        """stalenessBound 0: a fresh gradient joins the open round, answered once that round is applied.

        A worker already in the open round (it reconnected and pushed its next step) first waits for it to close,
        so its gradient is then one version stale and refused, and it carries on with the new parameters.
        """
        while worker in self.shard.round_workers:
            await self._round_closed()
        result = self.shard.apply(worker, step, version, grads)
        if result.accepted:
            if self.open_round is None:
                self.open_round = OpenRound(asyncio.Event(), time.monotonic() + self.round_seconds)
            self._close_round_if_complete()
            await self._round_closed()
        return self._reply_params(accepted=result.accepted, staleness=result.staleness, **self._news_for(worker))

    def _news_for(self, worker: int) -> Message:
        return {**self._pacing_for(worker), **self._checkpoint_for(worker)}

    def final_checkpoint(self) -> Message:
        """Worker 0 stops (a suspend, a preemption): checkpoint now, at its next step, and tell it which, so its
        last report names the checkpoint the job resumes from. A stopped server waits a moment for this ask before
        it closes (see watch); a later save of its own, if other workers pushed since, keeps the step's name."""
        self.final_asked = True
        self.save_final()
        last = self.checkpointer.last
        self.checkpoint_told = last
        if last is None:
            return {"op": "checkpoint"}
        return {"op": "checkpoint", "checkpoint": _said(last)}

    def _checkpoint_for(self, worker: int) -> Message:
        """{"checkpoint": ...} for worker 0 when this shard's newest complete checkpoint is one it has not heard of
        (it reports the job's checkpoints); nothing otherwise."""
        last = self.checkpointer.last
        if worker != 0 or last is None or last == self.checkpoint_told:
            return {}
        self.checkpoint_told = last
        return {"checkpoint": _said(last)}

    def _pacing_for(self, worker: int) -> Message:
        """{"checkpointPacing": ...} for worker 0 every few seconds (only servers save in this mode, and worker 0
        reports for the job: what its saves follow, checkpoint.everySteps: Auto or not); nothing for the others, or
        without TJ_CHECKPOINT_PACING."""
        now = time.monotonic()
        if worker != 0 or (self.pacing_told_at is not None and now - self.pacing_told_at < PACING_TELL_SECONDS):
            return {}
        pacing = self.checkpointer.pacing_report()
        if pacing is None:
            return {}
        self.pacing_told_at = now
        return {"checkpointPacing": pacing}

    def expected_workers(self) -> set[int]:
        """The workers a synchronous round waits for: not done, and connected or not yet seen to be gone."""
        return set(range(self.env.num_workers)) - self.done_workers - self.absent

    def _close_round_if_complete(self) -> None:
        if self.open_round is not None and self.expected_workers() <= self.shard.round_workers:
            self._close_round()

    def _close_round(self) -> None:
        assert self.open_round is not None
        self.shard.close_round()
        self.open_round.closed.set()
        self.open_round = None
        self._save_if_due()

    async def _round_closed(self) -> None:
        """Until the open round is applied; at its deadline, close it without the workers still missing."""
        current = self.open_round
        if current is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(current.closed.wait(), current.deadline - time.monotonic())
        if self.open_round is current:
            missing = sorted(self.expected_workers() - self.shard.round_workers)
            log.warning(
                "closing the round on version %d without worker(s) %s: silent for %gs",
                self.shard.version,
                missing,
                self.round_seconds,
            )
            self.absent.update(missing)
            self._close_round()

    def _wait_seconds(self, message: Message) -> float:
        timeout = message.get("timeout")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not math.isfinite(timeout):
            raise ProtocolError("'timeout' must be a finite number")
        return min(max(float(timeout), 0.0), self.env.master_wait_seconds)

    def accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """A new connection, served by a task of its own that shutdown can cancel; closed at once while too many
        others have yet to prove the job's key (each may take FIRST_MESSAGE_SECONDS): strangers cannot pile up
        tasks and buffers here, only delay the workers' own handshakes."""
        if self.handshakes >= self.max_handshakes:
            if time.monotonic() - self.refusal_logged_at > REFUSAL_LOG_SECONDS:  # a flood logs a line, not a flood
                log.warning(
                    "closing connections: %d handshakes under way (one from %s)", self.handshakes, peer_address(writer)
                )
                self.refusal_logged_at = time.monotonic()
            writer.close()
            return
        self.handshakes += 1
        task = asyncio.create_task(self.handle(reader, writer))
        self.connections.add(task)
        task.add_done_callback(self.connections.discard)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve one connection until it closes or breaks a rule; whatever the peer does, the server carries on."""
        peer = Peer(peer_address(writer))
        try:
            await self.converse(reader, writer, peer)
        except (ConnectionError, EOFError, TimeoutError, ValueError) as error:
            log.warning("dropping the connection from %s (worker %s): %s", peer.address, peer.worker, error)
        except Exception:
            log.exception("dropping the connection from %s (worker %s)", peer.address, peer.worker)
        finally:
            self.handshakes -= not peer.authenticated
            self.forget(peer)
            writer.close()

    async def converse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: Peer) -> None:
        """The nonce exchange and the first message within a deadline, then request after request."""
        async with asyncio.timeout(FIRST_MESSAGE_SECONDS):
            session = await accept_session(reader, writer, self.key, self.limit)
            if session is None:
                return
            message = await read_message(reader, session)
        self.handshakes -= 1  # authenticated: no longer counted against strangers' handshakes
        peer.authenticated = True
        while message is not None:
            await write_message(writer, session, await self.answer(peer, message))
            message = await read_message(reader, session)

    async def answer(self, peer: Peer, message: Message) -> Message:
        """dispatch(), counted as activity from the request until its reply (which may wait on other workers)."""
        self.in_flight += 1
        try:
            return await self.dispatch(peer, message)
        finally:
            self.in_flight -= 1
            self.last_message_at = time.monotonic()

    def quiet_seconds(self) -> float:
        """How long no request has been in progress."""
        return 0.0 if self.in_flight else time.monotonic() - self.last_message_at

    async def watch(self) -> ExitCode:
        """Wait for the end: finish, SIGTERM (once worker 0 asked for its final checkpoint, or after
        FINAL_ASK_SECONDS), all done and nobody asking, or silence past the deadline."""
        deadline = self.env.master_wait_seconds
        stopped_at: float | None = None
        while True:
            await asyncio.sleep(WATCH_INTERVAL)
            quiet = self.quiet_seconds()
            if self.finished.is_set() or (self.all_done.is_set() and quiet >= deadline):
                return ExitCode.SUCCEEDED
            if self.stop.is_set():
                stopped_at = time.monotonic() if stopped_at is None else stopped_at
                if self.final_asked or time.monotonic() - stopped_at >= FINAL_ASK_SECONDS:
                    return ExitCode.PREEMPTED
                continue
            if quiet >= deadline:
                raise RetryableError(f"no worker contacted parameter server {self.index} for {deadline:g}s")
            if self.checkpointer.is_time_due() and self.open_round is None:  # not half a synchronous round
                self.save()

    async def serve(self) -> ExitCode:
        """Run the server until watch() says the job is over, then write the final checkpoint."""
        self.resume()
        port = self.env.ps_addrs[self.index][1]
        server = await asyncio.start_server(self.accept, host=listen_address(), port=port, reuse_address=True)
        log.info("parameter server %d serving %d tensors on port %d", self.index, len(self.shard.params), port)
        try:
            code = await self.watch()
        finally:
            server.close()
            await self.close_connections()
            self.save_final()
            log.info("parameter server %d: version %d, %s", self.index, self.shard.version, self.shard.stats)
        return code

    async def close_connections(self) -> None:
        """End every open connection before the final checkpoint (quietly: a cancelled task is no error)."""
        tasks = list(self.connections)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _said(last: SavedCheckpoint) -> Message:
    """A checkpoint as worker 0 hears of it."""
    return {"step": last.step, "path": last.path, "time": last.time, "kept": list(last.kept)}


def run_parameter_server(env: TrainerEnv, config: TrainerConfig, stop: StopFlag) -> ExitCode:
    """The `ps` role's entry point."""
    configure_determinism()
    return asyncio.run(ParameterServer(env, config, stop).serve())
