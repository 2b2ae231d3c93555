"""stalenessBound 0 is synchronous: each update is the mean of one fresh gradient from every expected worker.

In process, at the asyncio-server level: the rounds of one shard of a 2-worker job, no port opened.
"""

import asyncio
import json
import secrets
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import torch

from trainer.config import parse_trainer_config
from trainer.env import TrainerEnv
from trainer.ps_server import ParameterServer
from trainer.ps_shard import ShardState
from trainer.ps_wire import Message, Peer
from trainer.signals import StopFlag

pytestmark = pytest.mark.fast

LEARNING_RATE = 0.5
WAIT_SECONDS = 10.0


@pytest.fixture
def server(tmp_path: Path) -> ParameterServer:
    """Shard 0 of 1 for a 2-worker job with stalenessBound 0."""
    key = tmp_path / "job.key"
    key.write_bytes(secrets.token_bytes(32))
    env = TrainerEnv(role="ps", num_workers=2, num_ps=1, ps_addrs=(("127.0.0.1", 1),), job_key_file=key)
    config = parse_trainer_config(json.dumps({"steps": 10, "learningRate": LEARNING_RATE, "stalenessBound": 0}))
    return ParameterServer(env, config, StopFlag())


async def hello(server: ParameterServer, worker: int) -> Peer:
    peer = Peer(f"worker-{worker}")
    await server.dispatch(peer, {"op": "hello", "worker": worker})
    return peer


def filled(server: ParameterServer, value: float) -> dict[str, torch.Tensor]:
    return {name: torch.full_like(param, value) for name, param in server.shard.values().items()}


def push(server: ParameterServer, peer: Peer, step: int, version: int, value: float) -> Coroutine[Any, Any, Message]:
    message = {"op": "push", "step": step, "version": version, "grads": filled(server, value)}
    return server.dispatch(peer, message)


def snapshot(server: ParameterServer) -> dict[str, torch.Tensor]:
    return {name: value.clone() for name, value in server.shard.values().items()}


def moved_by(server: ParameterServer, before: dict[str, torch.Tensor], gradient: float) -> bool:
    """The parameters are `before` after one plain SGD step on a constant gradient."""
    after = server.shard.values()
    return all(torch.allclose(after[name], value - LEARNING_RATE * gradient) for name, value in before.items())


async def pending(task: "asyncio.Task[Message]") -> bool:
    """Still unanswered once everything runnable has run."""
    for _ in range(5):
        await asyncio.sleep(0)
    return not task.done()


def summary(reply: Message) -> tuple[bool, int, int]:
    return reply["accepted"], reply["staleness"], reply["version"]


def test_two_workers_pushing_for_the_same_version_both_count_as_their_mean(server: ParameterServer) -> None:
    async def scenario() -> list[Message]:
        peers = [await hello(server, worker) for worker in range(2)]
        pushes = [push(server, peers[0], 0, 0, 0.01), push(server, peers[1], 0, 0, 0.03)]
        return list(await asyncio.wait_for(asyncio.gather(*pushes), WAIT_SECONDS))

    before = snapshot(server)
    replies = asyncio.run(scenario())
    assert [summary(reply) for reply in replies] == [(True, 0, 1)] * 2
    assert moved_by(server, before, 0.02)
    assert (server.shard.stats.accepted, server.shard.stats.refused) == (2, 0)


def test_a_gradient_computed_on_a_replaced_version_is_refused_at_once(server: ParameterServer) -> None:
    async def scenario() -> Message:
        peers = [await hello(server, worker) for worker in range(2)]
        round_zero = [push(server, peers[0], 0, 0, 0.01), push(server, peers[1], 0, 0, 0.01)]
        await asyncio.wait_for(asyncio.gather(*round_zero), WAIT_SECONDS)
        return await asyncio.wait_for(push(server, peers[1], 1, 0, 0.01), WAIT_SECONDS)

    stale = asyncio.run(scenario())
    assert summary(stale) == (False, 1, 1)
    assert (server.shard.version, server.shard.stats.accepted, server.shard.stats.refused) == (1, 2, 1)


async def report_done(server: ParameterServer, peer: Peer) -> None:
    await server.dispatch(peer, {"op": "done"})


async def disconnect(server: ParameterServer, peer: Peer) -> None:
    server.forget(peer)


async def stay_silent(server: ParameterServer, peer: Peer) -> None:
    """Nothing: the round's deadline closes it."""


RELEASES: dict[str, tuple[Callable[[ParameterServer, Peer], Awaitable[None]], float]] = {
    "worker-1-reports-done": (report_done, WAIT_SECONDS),
    "worker-1-disconnects": (disconnect, WAIT_SECONDS),
    "the-round-deadline-passes": (stay_silent, 1.0),
}


@pytest.mark.parametrize(("release", "round_seconds"), list(RELEASES.values()), ids=list(RELEASES))
def test_a_round_waits_for_every_worker_still_expected(
    server: ParameterServer, release: Callable[[ParameterServer, Peer], Awaitable[None]], round_seconds: float
) -> None:
    """Worker 0's gradient waits for worker 1's; once worker 1 drops out of the round it is applied alone."""
    server.round_seconds = round_seconds

    async def scenario() -> tuple[bool, Message]:
        peers = [await hello(server, worker) for worker in range(2)]
        task = asyncio.create_task(push(server, peers[0], 0, 0, 0.01))
        waited = await pending(task)
        await release(server, peers[1])
        return waited, await asyncio.wait_for(task, WAIT_SECONDS)

    before = snapshot(server)
    waited, reply = asyncio.run(scenario())
    assert waited, "worker 0's gradient was applied without waiting for worker 1's"
    assert summary(reply) == (True, 0, 1)
    assert moved_by(server, before, 0.01)


def test_a_second_push_into_the_same_round_waits_for_it_and_is_then_stale(server: ParameterServer) -> None:
    """Worker 0, reconnected mid-round, pushes its next step on the version the open round is replacing."""

    async def scenario() -> tuple[bool, list[Message]]:
        peers = [await hello(server, worker) for worker in range(2)]
        first = asyncio.create_task(push(server, peers[0], 0, 0, 0.01))
        second = asyncio.create_task(push(server, peers[0], 1, 0, 0.01))
        waited = await pending(first) and await pending(second)
        await push(server, peers[1], 0, 0, 0.03)
        return waited, list(await asyncio.wait_for(asyncio.gather(first, second), WAIT_SECONDS))

    waited, replies = asyncio.run(scenario())
    assert waited
    assert [summary(reply) for reply in replies] == [(True, 0, 1), (False, 1, 1)]


def test_a_shard_applies_a_synchronous_round_as_one_update_of_the_mean() -> None:
    state = ShardState({"w": torch.zeros(2)}, partial(torch.optim.SGD, lr=1.0), 0)
    assert state.apply(worker=0, step=0, version=0, grads={"w": torch.ones(2)}).accepted
    assert state.apply(worker=1, step=0, version=0, grads={"w": torch.full((2,), 3.0)}).accepted
    assert (state.version, state.round_workers) == (0, {0, 1})
    state.close_round()
    assert (state.version, state.round_workers) == (1, set())
    assert torch.equal(state.values()["w"], torch.full((2,), -2.0))
