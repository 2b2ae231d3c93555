"""A parameter-server worker restarts in place, with real processes on loopback: its pod's agent (a gang of one)
says its trainer failed, restarts it as the worker's next incarnation on a signed order, and the job trains on to
the end; the servers refuse an older incarnation once a newer one said hello (trainer.ps_fence)."""

import os
import signal
from pathlib import Path
from typing import Any

import pytest
import torch
from testbed.processes import free_port
from testbed.trainer_procs import Pod, config_json, ps_env, read_json, start_role, wait_for
from tests.support.trainer_runs import REPLY_LIMIT, RUN_TIMEOUT

from trainer.agent_http import request_json
from trainer.ps_fence import hello_message
from trainer.ps_wire import Connection, Message
from trainer.rendezvous import wait_for_port

pytestmark = pytest.mark.trainer

CONFIG = config_json(workload="digits-mlp", steps=150, batchSize=32, learningRate=0.05)


def test_a_killed_worker_restarts_in_place_as_its_next_incarnation(pods: list[Pod], logs: Path, tmp_path: Path) -> None:
    env = ps_env(tmp_path, shards=1, workers=2, config=CONFIG, wait="30")
    env["TJ_TEST_STEP_DELAY_SECONDS"] = "0.03"  # time to kill worker 1 before it is done
    server = start_role(pods, logs, env, "ps", 0)
    worker0 = start_role(pods, logs, env, "worker", 0)
    port = free_port()
    worker1 = start_role(pods, logs, env | {"TJ_IN_PLACE": "1", "TJ_AGENT_PORT": str(port)}, "worker", 1)
    address, key = ("127.0.0.1", port), Path(env["TJ_JOB_KEY_FILE"]).read_bytes()

    def agent(target: str) -> dict[str, Any] | None:
        try:
            answer = request_json(address, "GET", target)[1]
        except OSError:
            return None  # not listening yet
        return answer

    def training() -> dict[str, Any] | None:
        status = agent("/status")
        return (
            status if status and status["child"] and status["spare"] and "worker 1 connected" in server.text() else None
        )

    first = wait_for(training, 90, "worker 1 to train")["child"]
    assert "worker 1 connected from" in server.text() and "(incarnation 1 of agent " in server.text()
    os.kill(first, signal.SIGKILL)  # the trainer, not its agent
    failed = wait_for(lambda: (g := agent("/gang")) and g["state"] == "failed" and g, 30, "worker 1's agent to say")
    assert (failed["attempt"], failed["pods"], [f["exitCode"] for f in failed["failures"]]) == (1, 1, [137])
    assert request_json(address, "GET", "/ready") == (503, {"ready": False})
    assert request_json(address, "POST", "/attempt", body={"attempt": 2}, key=b"x" * 32)[0] == 401

    assert request_json(address, "POST", "/attempt", body={"attempt": 2}, key=key)[0] == 200
    wait_for(lambda: (g := agent("/gang")) and g["attempt"] == 2 and g["state"] == "running", 60, "incarnation 2")
    assert [pod.wait(RUN_TIMEOUT) for pod in (worker1, worker0, server)] == [0, 0, 0], "\n".join(
        pod.text() for pod in pods
    )
    assert "worker 1 is now incarnation 2 of agent" in server.text()  # its trainer read TJ_INCARNATION
    assert "attempt 1: handed to the warm spare" in worker1.text()  # TJ_ATTEMPT stays the job's
    progress = read_json(tmp_path / "progress.json")
    assert progress is not None and (progress["finished"], progress["workersDone"]) == (True, 2)


class WireWorker:
    """Worker 1 on the wire: one connection that says hello as an incarnation of agent "pod-a"."""

    def __init__(self, env: dict[str, str], incarnation: int) -> None:
        host, port = env["TJ_PS_ADDRS"].split(":")
        wait_for_port(host, int(port), 60, "parameter server")
        key = Path(env["TJ_JOB_KEY_FILE"]).read_bytes()
        self.connection = Connection(host, int(port), key, REPLY_LIMIT, 30)
        hello = self.connection.request(hello_message(1, "pod-a", incarnation))
        self.step, self.version = int(hello["next_step"]), int(hello["version"])
        self.zeros = {name: torch.zeros_like(value) for name, value in hello["params"].items()}

    def push(self) -> Message:
        message = {"op": "push", "worker": 1, "step": self.step, "version": self.version, "grads": self.zeros}
        reply = self.connection.request(message)
        self.step, self.version = self.step + 1, int(reply["version"])
        return reply


def test_an_older_incarnation_of_a_worker_can_never_push_again(pods: list[Pod], logs: Path, tmp_path: Path) -> None:
    env = ps_env(tmp_path, shards=1, workers=2, config=CONFIG, wait="30")
    server = start_role(pods, logs, env, "ps", 0)
    old = WireWorker(env, 1)
    old.push()
    new = WireWorker(env, 2)
    assert new.step == 1  # it resumes where the shard says
    with pytest.raises((OSError, ConnectionError)):
        old.push()  # its frame is refused and its connection dropped
    with pytest.raises((OSError, ConnectionError)):
        WireWorker(env, 1)  # nor may it say hello again
    assert new.push()["accepted"]
    assert "worker 1's incarnation 1 of agent pod-a is fenced off" in server.text()
