"""A worker the operator restarted alone keeps its parameter server: worker 0's final wait does not release the
server while that worker still trains, and gives up (retryable, saying why) only once it stays silent.

Worker 1 is this test, on the wire (zero gradients, so the job's result is worker 0's); worker 0 and the
server are real processes. Its first pod dies after a few steps; its replacement resumes where the shard says.
"""

import time
from pathlib import Path
from typing import Any

import pytest
import torch
from testbed.trainer_procs import Pod, config_json, ps_env, read_json, start_role, wait_for
from tests.support.trainer_runs import REPLY_LIMIT, RUN_TIMEOUT

from trainer.ps_wire import Connection, Message
from trainer.rendezvous import wait_for_port

pytestmark = pytest.mark.trainer

WAIT = 5.0  # TJ_MASTER_WAIT_SECONDS: how long silence is tolerated
CONFIG = config_json(workload="digits-mlp", steps=60, batchSize=32, learningRate=0.05)
FIRST_POD_STEPS = 3


class WireWorker:
    """Worker 1's pod: a hello, then pushes of zero gradients on the newest version it was sent."""

    def __init__(self, env: dict[str, str]) -> None:
        host, port = env["TJ_PS_ADDRS"].split(":")
        wait_for_port(host, int(port), 60, "parameter server")
        key = Path(env["TJ_JOB_KEY_FILE"]).read_bytes()
        self.connection = Connection(host, int(port), key, REPLY_LIMIT, 30)
        hello = self.connection.request({"op": "hello", "worker": 1})
        self.step, self.version = int(hello["next_step"]), int(hello["version"])
        self.zeros = {name: torch.zeros_like(value) for name, value in hello["params"].items()}

    def ask(self, op: str, **fields: Any) -> Message:
        return self.connection.request({"op": op, "worker": 1, **fields})

    def push(self) -> Message:
        reply = self.ask("push", step=self.step, version=self.version, grads=self.zeros)
        self.step, self.version = self.step + 1, int(reply["version"])
        return reply


def start_job_with_a_first_pod_of_worker_1_that_dies(
    pods: list[Pod], logs: Path, directory: Path, extra: dict[str, str] | None = None
) -> tuple[dict[str, str], Pod]:
    """The server, worker 1's first pod (alive until worker 0 trains, then gone) and worker 0: the job's
    environment (with `extra`) and worker 0."""
    env = ps_env(directory, shards=1, workers=2, config=CONFIG, wait=f"{WAIT:g}") | (extra or {})
    start_role(pods, logs, env, "ps", 0)
    first = WireWorker(env)
    worker0 = start_role(pods, logs, env, "worker", 0)
    wait_for(lambda: first.ask("pull")["version"] > 0, 90, "worker 0 to train")  # asking keeps the server up
    for _ in range(FIRST_POD_STEPS):
        first.push()
    first.connection.close()
    return env, worker0


def train_slowly(worker: WireWorker, seconds: float) -> None:
    """Push a step every 0.1s for `seconds`: a worker still training long after worker 0 finished."""
    until = time.monotonic() + seconds
    try:
        wait_for(lambda: worker.push() and time.monotonic() >= until, seconds + 30, "the slow steps", 0.1)
    except OSError as error:
        raise AssertionError(f"the parameter server went away while worker 1 was still training: {error}") from None


def test_a_replaced_worker_still_training_keeps_its_parameter_server(
    pods: list[Pod], logs: Path, tmp_path: Path
) -> None:
    env, worker0 = start_job_with_a_first_pod_of_worker_1_that_dies(pods, logs, tmp_path)
    replacement = WireWorker(env)
    assert replacement.step == FIRST_POD_STEPS  # it resumes where the shard says
    wait_for(lambda: 0 in replacement.ask("wait_done", timeout=0)["done"], 90, "worker 0 to finish its steps")
    train_slowly(replacement, WAIT + 2)
    replacement.ask("done")
    codes = [pod.wait(RUN_TIMEOUT) for pod in pods]
    replacement.connection.close()
    assert codes == [0, 0], "\n".join(pod.text() for pod in pods)
    progress = read_json(tmp_path / "progress.json")
    assert progress is not None and (progress["finished"], progress["workersDone"]) == (True, 2)
    assert "waiting for worker(s) [1]" in worker0.text()


def test_worker_0_gives_up_retryably_once_an_unfinished_worker_stays_silent(
    pods: list[Pod], logs: Path, tmp_path: Path
) -> None:
    _, worker0 = start_job_with_a_first_pod_of_worker_1_that_dies(pods, logs, tmp_path)
    codes = [pod.wait(RUN_TIMEOUT) for pod in pods]
    assert codes == [75, 75], "\n".join(pod.text() for pod in pods)
    assert "worker(s) [1] have not finished" in worker0.text()
    assert "not releasing the parameter servers" in worker0.text()
    progress = read_json(tmp_path / "progress.json")
    assert progress is not None and progress["finished"] is False
    # It kept its heartbeat through the wait (at least WAIT seconds after its first step), so the operator never
    # took the wait for a stall; a worker 0 silent while it waited would show its last step's time.
    assert progress["heartbeat"] - progress["firstStepTime"] >= WAIT / 2, progress


MIN_ONE = {"TJ_MIN_WORKERS": "1"}  # workers.minReplicas 1: worker 1 may never come (no node has room for it)


def test_a_worker_beyond_min_replicas_that_never_came_does_not_hold_the_end(
    pods: list[Pod], logs: Path, tmp_path: Path
) -> None:
    env = ps_env(tmp_path, shards=1, workers=2, config=CONFIG, wait=f"{WAIT:g}") | MIN_ONE
    # Worker 0 starts once the server listens, and the server waits 90 s for its first worker: each imports torch,
    # which on a loaded machine can take longer than WAIT (in CI the server came up 6 s after worker 0 gave up on it).
    start_role(pods, logs, {**env, "TJ_MASTER_WAIT_SECONDS": "90"}, "ps", 0)
    host, port = env["TJ_PS_ADDRS"].split(":")
    wait_for_port(host, int(port), 90, "parameter server")
    worker0 = start_role(pods, logs, env, "worker", 0)
    codes = [pod.wait(RUN_TIMEOUT) for pod in pods]
    assert codes == [0, 0], "\n".join(pod.text() for pod in pods)
    progress = read_json(tmp_path / "progress.json")
    assert progress is not None and progress["finished"] is True, progress
    assert "waiting for worker(s)" not in worker0.text()  # never heard of: not waited for at all


def test_a_worker_beyond_min_replicas_gone_silent_is_left_behind(pods: list[Pod], logs: Path, tmp_path: Path) -> None:
    _, worker0 = start_job_with_a_first_pod_of_worker_1_that_dies(pods, logs, tmp_path, MIN_ONE)
    codes = [pod.wait(RUN_TIMEOUT) for pod in pods]
    assert codes == [0, 0], "\n".join(pod.text() for pod in pods)
    assert "releasing the parameter servers without worker(s) [1]" in worker0.text()
    progress = read_json(tmp_path / "progress.json")
    assert progress is not None and progress["finished"] is True, progress
