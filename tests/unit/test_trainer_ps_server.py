"""The parameter server's rules for authenticated peers, in process: who may say what, and a quiet shutdown."""

import asyncio
import logging
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from testbed.processes import free_port

from trainer.config import parse_trainer_config
from trainer.env import CheckpointPolicy, TrainerEnv
from trainer.ps_server import ParameterServer
from trainer.ps_wire import Message, Peer, ProtocolError
from trainer.signals import StopFlag

pytestmark = pytest.mark.fast

WORKERS = 2


@pytest.fixture
def server(tmp_path: Path) -> ParameterServer:
    """Shard 0 of 1 for a 2-worker job; no port is opened."""
    key = tmp_path / "job.key"
    key.write_bytes(secrets.token_bytes(32))
    env = TrainerEnv(role="ps", num_workers=WORKERS, num_ps=1, ps_addrs=(("127.0.0.1", free_port()),), job_key_file=key)
    config = parse_trainer_config('{"steps": 10, "learningRate": 0.1, "stalenessBound": 2}')
    return ParameterServer(env, config, StopFlag())


def ask(server: ParameterServer, peer: Peer, message: Message) -> Message:
    return asyncio.run(server.dispatch(peer, message))


def hello(server: ParameterServer, worker: int) -> Peer:
    peer = Peer("test")
    ask(server, peer, {"op": "hello", "worker": worker})
    return peer


def grads(server: ParameterServer) -> dict[str, torch.Tensor]:
    return {name: torch.full_like(value, 0.01) for name, value in server.shard.values().items()}


def push(server: ParameterServer, **fields: Any) -> Message:
    return {"op": "push", "step": 0, "version": 0, "grads": grads(server), **fields}


def test_an_honest_worker_is_served(server: ParameterServer) -> None:
    peer = hello(server, 1)
    assert ask(server, peer, push(server))["accepted"]
    assert ask(server, peer, push(server, step=1, version=1, worker=1))["accepted"]
    assert ask(server, peer, push(server, step=0))["accepted"] is False  # a repeat, ignored
    assert ask(server, peer, {"op": "done", "worker": 1})["done"] == [1]
    assert (server.shard.version, server.shard.next_step(1)) == (2, 2)


def mangle(name: str, change: Callable[[torch.Tensor], object]) -> Callable[[ParameterServer], Message]:
    def build(server: ParameterServer) -> Message:
        g: dict[str, object] = dict(grads(server))
        g[name] = change(server.shard.params[name])
        return push(server, grads=g)

    return build


FIRST = "0.weight"
REFUSED: dict[str, Callable[[ParameterServer], Message]] = {
    "unknown-op": lambda s: {"op": "shutdown"},
    "other-worker-push": lambda s: push(s, worker=0),
    "other-worker-done": lambda s: {"op": "done", "worker": 0},
    "second-hello-as-other": lambda s: {"op": "hello", "worker": 0},
    "finish-from-worker-1": lambda s: {"op": "finish"},
    "checkpoint-from-worker-1": lambda s: {"op": "checkpoint"},
    "step-skips-ahead": lambda s: push(s, step=1),
    "huge-step": lambda s: push(s, step=1 << 62),
    "negative-step": lambda s: push(s, step=-1),
    "step-as-bool": lambda s: push(s, step=True),
    "step-as-float": lambda s: push(s, step=0.0),
    "version-from-the-future": lambda s: push(s, version=1),
    "grads-missing-one": lambda s: push(s, grads=dict(list(grads(s).items())[1:])),
    "grads-extra-name": lambda s: push(s, grads={**grads(s), "evil": torch.zeros(1)}),
    "grads-not-a-dict": lambda s: push(s, grads=[1, 2]),
    "grad-wrong-shape": mangle(FIRST, lambda p: torch.zeros(p.numel())),
    "grad-wrong-dtype": mangle(FIRST, lambda p: torch.zeros(p.shape, dtype=torch.float64)),
    "grad-sparse": mangle(FIRST, lambda p: torch.zeros(p.shape).to_sparse()),
    "grad-not-a-tensor": mangle(FIRST, lambda p: 0.0),
    "wait-done-nan": lambda s: {"op": "wait_done", "timeout": float("nan")},
}


@pytest.mark.parametrize("build", list(REFUSED.values()), ids=list(REFUSED))
def test_a_worker_breaking_a_rule_is_refused_and_changes_nothing(
    server: ParameterServer, build: Callable[[ParameterServer], Message]
) -> None:
    peer = hello(server, 1)
    before = {name: value.clone() for name, value in server.shard.values().items()}
    with pytest.raises(ProtocolError):
        ask(server, peer, build(server))
    assert (server.shard.version, server.shard.next_steps, server.done_workers) == (0, {}, set())
    assert not server.finished.is_set()
    assert all(torch.equal(before[name], value) for name, value in server.shard.values().items())


@pytest.mark.parametrize("worker", [-1, WORKERS, 1 << 40, "0", None], ids=str)
def test_hello_names_a_worker_of_this_job(server: ParameterServer, worker: object) -> None:
    with pytest.raises(ProtocolError):
        ask(server, Peer("test"), {"op": "hello", "worker": worker})


@pytest.mark.parametrize("op", ["push", "pull", "done", "wait_done", "finish"])
def test_nothing_but_hello_comes_first(server: ParameterServer, op: str) -> None:
    with pytest.raises(ProtocolError, match="before hello"):
        ask(server, Peer("test"), {"op": op, "worker": 0})


def test_only_worker_0_finishes_the_job(server: ParameterServer) -> None:
    assert ask(server, hello(server, 0), {"op": "finish"}) == {"op": "bye"}
    assert server.finished.is_set()


def test_worker_0_stopping_gets_a_checkpoint_at_its_next_step_written_once(tmp_path: Path) -> None:
    """The ask of a stopping worker 0: the shard saves at worker 0's next step (the job's step, not the shard's
    version) and names it; asked again, or stopped, with nothing new, it writes nothing more."""
    key = tmp_path / "job.key"
    key.write_bytes(secrets.token_bytes(32))
    env = TrainerEnv(
        role="ps", num_workers=WORKERS, num_ps=1, ps_addrs=(("127.0.0.1", free_port()),), job_key_file=key,
        checkpoint=CheckpointPolicy(directory=tmp_path / "checkpoints"),
    )  # fmt: skip
    config = parse_trainer_config('{"steps": 10, "learningRate": 0.1, "stalenessBound": 2}')
    server = ParameterServer(env, config, StopFlag())
    zero, one = hello(server, 0), hello(server, 1)
    for step in range(3):
        ask(server, one, push(server, step=step, version=server.shard.version))
    ask(server, zero, push(server, version=server.shard.version))
    said = ask(server, zero, {"op": "checkpoint"})
    assert said["checkpoint"]["step"] == 1 and server.shard.version == 4
    assert said["checkpoint"]["path"] == str(tmp_path / "checkpoints" / "ps-0" / "step-1")
    assert ask(server, zero, {"op": "checkpoint"})["checkpoint"] == said["checkpoint"]
    server.save_final()
    assert server.checkpointer.saves == 1


def test_shutdown_with_connections_open_is_quiet(server: ParameterServer, caplog: pytest.LogCaptureFixture) -> None:
    """Clients still connected when the job ends (one silent, one past the nonce) are closed, without a traceback."""
    host, port = server.env.ps_addrs[0]

    async def scenario() -> None:
        serving = asyncio.create_task(server.serve())
        opened = [await _connect(host, port) for _ in range(2)]
        opened[1][1].write(secrets.token_bytes(32))
        await _poll(lambda: len(server.connections) == 2, "both connections to be served")
        server.finished.set()
        await serving
        assert not server.connections
        assert [len(await reader.read()) for reader, _ in opened] == [0, 32]  # the server's nonce, nothing more

    with caplog.at_level(logging.DEBUG):
        asyncio.run(scenario())
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info] == []


async def _poll(predicate: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def _connect(host: str, port: int, timeout: float = 10.0) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            return await asyncio.open_connection(host, port)
        except OSError:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.02)
