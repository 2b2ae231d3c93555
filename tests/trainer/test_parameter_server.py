"""Parameter-server mode through the real entry point: 4 workers, 2 shards, bounded staleness, dead peers."""

import signal
from pathlib import Path

import pytest
import torch
from testbed.trainer_procs import Pod, config_json, ps_env, read_json, start_ps_job, start_role, wait_for
from tests.support.trainer_runs import REPLY_LIMIT, RUN_TIMEOUT, assert_refused_exactly_beyond

from trainer.checkpoint_store import load_newest
from trainer.ps_wire import Connection
from trainer.rendezvous import wait_for_port

pytestmark = pytest.mark.trainer

BOUND = 4


def test_four_workers_two_shards_reach_accuracy_within_the_staleness_bound(
    pods: list[Pod], logs: Path, tmp_path: Path
) -> None:
    config = config_json(
        workload="digits-mlp", steps=200, batchSize=32, learningRate=0.05, momentum=0.5, stalenessBound=BOUND
    )
    servers, workers = start_ps_job(pods, logs, tmp_path, shards=2, workers=4, config=config, wait="60")
    codes = [pod.wait(RUN_TIMEOUT) for pod in servers + workers]
    assert codes == [0] * 6, "\n".join(pod.text() for pod in pods)
    progress = read_json(tmp_path / "progress.json")
    assert progress is not None
    print("parameter-server summary:", {key: progress[key] for key in sorted(progress)})
    assert progress["workersDone"] == 4
    assert isinstance(progress["accuracy"], float) and progress["accuracy"] >= 0.93
    assert isinstance(progress["maxStaleness"], int) and 0 <= progress["maxStaleness"] <= BOUND
    assert progress["acceptedGradients"] + progress["refusedGradients"] == 2 * 4 * 200
    assert_refused_exactly_beyond(progress, BOUND)
    for index in range(2):
        assert any((tmp_path / "checkpoints" / f"ps-{index}").glob("step-*/COMPLETE"))


def test_a_bound_of_zero_runs_synchronous_rounds_that_use_every_workers_gradient(
    pods: list[Pod], logs: Path, tmp_path: Path
) -> None:
    """Two workers in lockstep: every gradient is fresh and applied, two per update, so one update per step."""
    steps = 60
    config = config_json(workload="digits-mlp", steps=steps, batchSize=32, learningRate=0.05, stalenessBound=0)
    servers, workers = start_ps_job(pods, logs, tmp_path, shards=1, workers=2, config=config, wait="60")
    codes = [pod.wait(RUN_TIMEOUT) for pod in servers + workers]
    assert codes == [0] * 3, "\n".join(pod.text() for pod in pods)
    progress = read_json(tmp_path / "progress.json")
    assert progress is not None
    assert (progress["acceptedGradients"], progress["refusedGradients"]) == (2 * steps, 0)
    assert (progress["maxStaleness"], progress["maxStalenessSeen"], progress["workersDone"]) == (0, 0, 2)
    newest = load_newest(tmp_path / "checkpoints" / "ps-0")
    assert newest is not None and newest[1]["shard"]["version"] == steps


def test_a_bound_of_zero_refuses_every_stale_gradient(pods: list[Pod], logs: Path, tmp_path: Path) -> None:
    """Worker 1 is this test, on the wire: it joins the first synchronous round with worker 0, then pushes
    gradients computed on the version-0 parameters that round replaced, so their staleness is known to be
    positive however the processes are scheduled; each is refused at once, without waiting for a round."""
    config = config_json(workload="digits-mlp", steps=60, batchSize=32, learningRate=0.05, stalenessBound=0)
    env = ps_env(tmp_path, shards=1, workers=2, config=config, wait="60")
    server = start_role(pods, logs, env, "ps", 0)
    host, port = env["TJ_PS_ADDRS"].split(":")
    wait_for_port(host, int(port), 60, "parameter server")
    stale = Connection(host, int(port), Path(env["TJ_JOB_KEY_FILE"]).read_bytes(), REPLY_LIMIT, RUN_TIMEOUT)
    hello = stale.request({"op": "hello", "worker": 1})
    zeros = {name: torch.zeros_like(value) for name, value in hello["params"].items()}
    worker = start_role(pods, logs, env, "worker", 0)
    replies = [
        stale.request({"op": "push", "worker": 1, "step": step, "version": hello["version"], "grads": zeros})
        for step in range(4)
    ]
    stale.request({"op": "done", "worker": 1})
    assert (replies[0]["accepted"], replies[0]["staleness"]) == (True, 0)  # the first round, shared
    assert [(r["accepted"], r["staleness"] > 0) for r in replies[1:]] == [(False, True)] * 3
    codes = [pod.wait(RUN_TIMEOUT) for pod in (server, worker)]
    stale.close()
    assert codes == [0] * 2, "\n".join(pod.text() for pod in pods)
    progress = read_json(tmp_path / "progress.json")
    assert progress is not None
    assert (progress["maxStaleness"], progress["refusedGradients"], progress["acceptedGradients"]) == (0, 3, 61)
    assert progress["maxStalenessSeen"] > 0
    assert_refused_exactly_beyond(progress, 0)


def test_workers_exit_retryable_when_their_parameter_server_dies(pods: list[Pod], logs: Path, tmp_path: Path) -> None:
    config = config_json(workload="digits-mlp", steps=1_000_000, batchSize=32, learningRate=0.05)
    # The workers wait 3 s for a lost server, and start once it listens (a start takes longer than 3 s on a loaded
    # machine). The server waits 90 s for its first worker: it gives up after its wait of silence, and the workers'
    # own start (importing torch) can take longer than 3 s too.
    env = ps_env(tmp_path, shards=1, workers=2, config=config, wait="3")
    servers = [start_role(pods, logs, {**env, "TJ_MASTER_WAIT_SECONDS": "90"}, "ps", 0)]
    host, port = env["TJ_PS_ADDRS"].split(":")
    wait_for_port(host, int(port), 90, "parameter server")
    workers = [start_role(pods, logs, env, "worker", index) for index in range(2)]
    wait_for(lambda: (read_json(tmp_path / "progress.json") or {}).get("step", 0) >= 10, 90, "training to start")
    servers[0].process.send_signal(signal.SIGKILL)
    codes = [pod.wait(30) for pod in workers]
    assert codes == [75, 75], "\n".join(pod.text() for pod in workers)
    assert "lost a parameter server" in workers[0].text()
