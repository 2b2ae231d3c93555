"""The in-place agent (TJ_IN_PLACE=1) with real processes on loopback: a failed rank's gang restarts inside its
pods on a signed order and resumes from the checkpoint; without an order the pod fails as before; a permanent
failure exits at once; no child outlives its agent; a process of an older attempt cannot join a newer rendezvous."""

import json
import os
import signal
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from testbed.processes import free_port
from testbed.trainer_procs import (
    AgentGang,
    Pod,
    config_json,
    ddp_env,
    is_connected_to,
    progress_of,
    read_json,
    start_agent_gang,
    start_pod,
    wait_for,
)

from trainer.agent_http import request_json

pytestmark = pytest.mark.trainer

DIGITS = config_json(workload="digits-mlp", steps=200, batchSize=32, learningRate=0.1, momentum=0.9, seed=7)
SHORT = config_json(workload="digits-mlp", steps=40, batchSize=32, learningRate=0.1)
ENDLESS = config_json(workload="digits-mlp", steps=1_000_000, batchSize=32, learningRate=0.1)
SLOW_STEPS = "0.03"  # seconds added to each step: time to kill a trainer between two checkpoints
SLOW = {"TJ_TEST_STEP_DELAY_SECONDS": SLOW_STEPS}  # an endless run that leaves the cores to the zygote's warm-up
RUN_TIMEOUT = 120.0
SPARE_TIMEOUT = 180.0  # the zygote imports torch at a lowered priority beside the training


def agent(gang: AgentGang, node: int, target: str) -> dict[str, Any]:
    """GET `target` from node `node`'s agent; the JSON it answers."""
    status, body = request_json(gang.address(node), "GET", target)
    assert status in (200, 503) and body is not None, (status, body)
    return body


def gang_when(gang: AgentGang, **fields: object) -> dict[str, Any] | None:
    """The coordinator's /gang if it has these fields, else None (for wait_for)."""
    view = agent(gang, 0, "/gang")
    return view if all(view.get(name) == value for name, value in fields.items()) else None


def with_spare(gang: AgentGang, node: int = 0) -> dict[str, Any] | None:
    """Node `node`'s /status once its agent runs a child and has a warm spare, else None (for wait_for)."""
    return gang.status_with("child", "spare", node=node)


def command_line(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_text().rstrip("\0").split("\0")


def is_forked_spare(pid: int, agent_pid: int) -> bool:
    """The process is a fork of the zygote (its command line is the zygote's), the agent's child, and the leader
    of a session (so of a process group) of its own."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    parent, session = int(fields[1]), int(fields[3])
    return "--zygote" in command_line(pid) and parent == agent_pid and session == pid


def trained_on(progress_file: Path, attempt: int) -> dict[str, Any] | None:
    """Rank 0's progress once `attempt` has trained a step past the one it resumed from, else None."""
    progress = read_json(progress_file) or {}
    past = progress.get("attempt") == attempt and progress.get("step", 0) > progress.get("resumedFromStep", 0)
    return progress if past else None


def is_gone(pid: int) -> bool:
    """The process is gone, reaped and all (no /proc entry left)."""
    return not Path(f"/proc/{pid}").exists()


def is_dead(pid: int) -> bool:
    """The process is gone or a zombie (dead, waiting for whoever inherited it to reap it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_a_failed_rank_and_a_stalled_gang_restart_in_place_from_the_checkpoint(
    pods: list[Pod], logs: Path, tmp_path: Path
) -> None:
    directory = tmp_path / "job"
    gang = start_agent_gang(pods, logs, directory, 2, config=DIGITS, TJ_TEST_STEP_DELAY_SECONDS=SLOW_STEPS)
    progress_file = directory / "progress.json"
    checkpoint = wait_for(lambda: (read_json(progress_file) or {}).get("lastCheckpointStep"), 90, "a checkpoint")
    spares = [
        wait_for(partial(with_spare, gang, node), SPARE_TIMEOUT, f"node {node}'s spare")["spare"] for node in (0, 1)
    ]
    assert all(is_forked_spare(spare, pod.process.pid) for spare, pod in zip(spares, gang.pods, strict=True))
    rank0_child, victim = agent(gang, 0, "/status")["child"], agent(gang, 1, "/status")["child"]
    os.kill(victim, signal.SIGKILL)  # rank 1's trainer, not its agent

    def failed_with_rank_1() -> dict[str, Any] | None:
        view = gang_when(gang, attempt=1, state="failed")
        failures = [(failure["rank"], failure["exitCode"]) for failure in (view or {}).get("failures", [])]
        return view if (1, 137) in failures else None

    # Rank 0's trainer may fail first (exit 75: its peer went away) and be listed first.
    failed = wait_for(failed_with_rank_1, 30, "the gang to fail with rank 1's 137")
    assert {failure["rank"] for failure in failed["failures"]} <= {0, 1}
    assert request_json(gang.address(0), "GET", "/ready") == (503, {"ready": False})
    wait_for(lambda: is_gone(rank0_child), 30, "rank 0's trainer to be stopped")
    assert [pod.process.poll() for pod in gang.pods] == [None, None], "an agent exited"
    for key in (None, b"x" * 32):
        assert request_json(gang.address(0), "POST", "/attempt", body={"attempt": 2}, key=key)[0] == 401
    assert agent(gang, 0, "/gang") == failed

    status, ordered = request_json(gang.address(0), "POST", "/attempt", body={"attempt": 2}, key=gang.key)
    assert status == 200 and ordered is not None and ordered["attempt"] == 2
    wait_for(lambda: gang_when(gang, attempt=2, state="running", running=2), 60, "both pods to run attempt 2")
    resumed = wait_for(lambda: trained_on(progress_file, 2), 60, "attempt 2 to train")
    assert checkpoint <= resumed["resumedFromStep"] < resumed["step"], "attempt 2 did not resume from the checkpoint"
    assert all("attempt 2: handed to the warm spare" in pod.text() for pod in gang.pods)
    assert [agent(gang, node, "/status")["child"] for node in (0, 1)] == spares

    # A stalled gang (still "running") is restarted the same way.
    assert request_json(gang.address(0), "POST", "/attempt", body={"attempt": 3}, key=gang.key)[0] == 200
    wait_for(lambda: gang_when(gang, attempt=3, state="running", running=2), 60, "both pods to run attempt 3")
    assert [pod.wait(RUN_TIMEOUT) for pod in gang.pods] == [0, 0], "\n".join(pod.text() for pod in gang.pods)
    progress = progress_of(directory)
    assert (progress["attempt"], progress["step"], progress["finished"]) == (3, 200, True)
    assert progress["resumedFromStep"] >= resumed["resumedFromStep"]
    history = [json.loads(line) for line in (directory / "checkpoints" / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in history if line["kind"] == "train"] == list(range(1, 201))


def test_without_an_order_the_agent_exits_with_its_trainers_code(pods: list[Pod], logs: Path, tmp_path: Path) -> None:
    extra = {"TJ_TEST_KILL_AT_STEP": "5", "TJ_TEST_KILL_RANK": "0", "TJ_IN_PLACE_WAIT_SECONDS": "2"}
    gang = start_agent_gang(pods, logs, tmp_path / "job", 1, config=SHORT, **extra)
    status = wait_for(lambda: gang.status_with("zygote"), 30, "the zygote")
    pod = gang.pods[0]
    assert pod.wait(RUN_TIMEOUT) == 137, pod.text()
    assert "no order within 2s: exiting with 137" in pod.text()
    children = [pid for pid in (status["zygote"], status["spare"]) if pid]
    wait_for(lambda: all(map(is_gone, children)), 10, "the zygote and spare to be gone with their agent")


def test_a_permanent_failure_exits_at_once(pods: list[Pod], logs: Path, tmp_path: Path) -> None:
    broken = json.dumps({"entrypoint": "no_such_package.train:build", "steps": 10})  # only the trainer finds out
    gang = start_agent_gang(pods, logs, tmp_path / "job", 1, config=broken, TJ_IN_PLACE_WAIT_SECONDS="600")
    pod = gang.pods[0]
    assert pod.wait(60) == 78, pod.text()
    assert "failed permanently" in pod.text() and "field 'entrypoint'" in pod.text()


def test_sigterm_to_an_agent_stops_its_trainer_and_leaves_no_child(pods: list[Pod], logs: Path, tmp_path: Path) -> None:
    directory = tmp_path / "job"
    gang = start_agent_gang(pods, logs, directory, 1, config=ENDLESS, TJ_CHECKPOINT_EVERY_STEPS="", **SLOW)
    wait_for(lambda: (read_json(directory / "progress.json") or {}).get("step", 0) >= 5, 90, "training to start")
    status = wait_for(lambda: with_spare(gang), SPARE_TIMEOUT, "the warm spare")
    pod = gang.pods[0]
    assert "libtorch" not in Path(f"/proc/{pod.process.pid}/maps").read_text(), "the agent imported torch"
    pod.process.send_signal(signal.SIGTERM)
    assert pod.wait(60) == 79, pod.text()
    assert progress_of(directory)["exitCode"] == 79  # the trainer checkpointed and stopped, as without the agent
    children = (status["child"], status["spare"], status["zygote"])
    wait_for(lambda: all(map(is_gone, children)), 10, "the agent's children to be gone")


def test_a_killed_agent_takes_its_children_along(pods: list[Pod], logs: Path, tmp_path: Path) -> None:
    gang = start_agent_gang(pods, logs, tmp_path / "job", 1, config=ENDLESS, **SLOW)
    status = wait_for(lambda: with_spare(gang), SPARE_TIMEOUT, "the warm spare")
    assert is_forked_spare(status["spare"], gang.pods[0].process.pid)
    gang.pods[0].process.kill()
    gang.pods[0].process.wait()
    children = (status["child"], status["spare"], status["zygote"])
    wait_for(lambda: all(map(is_dead, children)), 10, "the agent's children to die")


def test_when_the_zygote_fails_spares_are_new_processes(pods: list[Pod], logs: Path, tmp_path: Path) -> None:
    gang = start_agent_gang(pods, logs, tmp_path / "job", 1, config=ENDLESS, **SLOW)
    status = wait_for(lambda: with_spare(gang), SPARE_TIMEOUT, "the warm spare")
    os.kill(status["zygote"], signal.SIGKILL)
    wait_for(lambda: is_dead(status["zygote"]), 10, "the zygote to die")
    os.kill(status["spare"], signal.SIGKILL)  # the next spare must come from somewhere else

    def new_spare() -> dict[str, Any] | None:
        now = with_spare(gang)
        return now if now is not None and now["spare"] != status["spare"] else None

    replaced = wait_for(new_spare, SPARE_TIMEOUT, "a new spare")
    assert replaced["zygote"] is None and replaced["child"] == status["child"]
    assert command_line(replaced["spare"])[-2:] == ["--spare", str(gang.pods[0].process.pid)]
    assert f"the zygote (pid {status['zygote']}) failed" in gang.pods[0].text()


def test_a_stale_attempt_cannot_join_the_new_rendezvous(pods: list[Pod], logs: Path, tmp_path: Path) -> None:
    port = free_port()

    def rank(node: int, attempt: int) -> Pod:
        env = ddp_env(port, 2, 1, node, tmp_path, config=SHORT, TJ_ATTEMPT=str(attempt))
        pod = start_pod(f"node{node}-attempt{attempt}", env, logs)
        pods.append(pod)
        return pod

    stale = rank(1, 1)  # attempt 1's rank 1, still around when attempt 2 starts
    current = [rank(0, 2)]
    wait_for(lambda: is_connected_to(stale.process.pid, port), 90, "the stale rank to reach attempt 2's store")
    current.append(rank(1, 2))
    assert [pod.wait(RUN_TIMEOUT) for pod in current] == [0, 0], "\n".join(pod.text() for pod in current)
    progress = progress_of(tmp_path)
    assert (progress["attempt"], progress["step"], progress["finished"]) == (2, 40, True)
    assert "rank 1 of 2" not in stale.text(), "the stale rank joined attempt 2's group"
    assert stale.process.poll() in (None, 75), stale.text()
