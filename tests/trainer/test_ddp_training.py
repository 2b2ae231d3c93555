"""DDP through the real entry point: accuracy with 2 and 4 ranks, bitwise resume after a SIGKILLed rank."""

from pathlib import Path

import pytest
import torch
from testbed.processes import free_port
from testbed.trainer_procs import (
    Pod,
    config_json,
    ddp_env,
    load_model_state,
    progress_of,
    start_gang,
    start_pod,
    wait_for,
)

pytestmark = pytest.mark.trainer

DIGITS = config_json(workload="digits-mlp", steps=200, batchSize=32, learningRate=0.1, momentum=0.9, seed=7)
RUN_TIMEOUT = 120.0


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One uninterrupted 2-rank run (one pod, two local ranks): the baseline of the resume test."""
    directory = tmp_path_factory.mktemp("reference")
    pod = start_pod("reference", ddp_env(free_port(), 2, 2, 0, directory, config=DIGITS), directory)
    code = pod.wait(RUN_TIMEOUT)
    assert code == 0, pod.text()
    return directory


def test_two_ranks_reach_accuracy_and_keep_last_checkpoints(reference: Path) -> None:
    progress = progress_of(reference)
    assert progress["finished"] is True
    assert progress["step"] == 200
    assert isinstance(progress["accuracy"], float)
    assert progress["accuracy"] >= 0.95
    assert progress["lastCheckpointStep"] == 200
    steps = sorted(path.name for path in (reference / "checkpoints").iterdir() if path.name != "metrics.jsonl")
    assert steps == ["step-160", "step-200"]


def test_four_ranks_on_two_pods_wait_for_the_master(pods: list[Pod], logs: Path, tmp_path: Path) -> None:
    directory = tmp_path / "four"
    port = free_port()
    late_master = start_pod("node1", ddp_env(port, 4, 2, 1, directory, config=DIGITS), logs)
    pods.append(late_master)
    waiting = f"waiting up to 60s for rank 0 (MASTER_ADDR) at 127.0.0.1:{port}"
    wait_for(lambda: waiting in late_master.text(), 60, "node 1 to wait for rank 0")
    pods.append(start_pod("node0", ddp_env(port, 4, 2, 0, directory, config=DIGITS), logs))
    codes = [pod.wait(RUN_TIMEOUT) for pod in pods]
    assert codes == [0, 0], "\n".join(pod.text() for pod in pods)
    progress = progress_of(directory)
    assert isinstance(progress["accuracy"], float)
    assert progress["accuracy"] >= 0.95


def test_sigkilled_rank_resumes_bitwise_identical(reference: Path, pods: list[Pod], logs: Path, tmp_path: Path) -> None:
    directory = tmp_path / "killed"
    first = start_gang(
        pods, logs, directory, world=2, nproc=1, config=DIGITS, TJ_TEST_KILL_AT_STEP="130", TJ_TEST_KILL_RANK="1"
    )
    codes = [pod.wait(RUN_TIMEOUT) for pod in first]
    assert codes == [75, -9], "\n".join(pod.text() for pod in first)
    assert progress_of(directory)["lastCheckpointStep"] == 120

    second = start_gang(pods, logs, directory, world=2, nproc=1, config=DIGITS, TJ_ATTEMPT="2")
    codes = [pod.wait(RUN_TIMEOUT) for pod in second]
    assert codes == [0, 0], "\n".join(pod.text() for pod in second)
    progress = progress_of(directory)
    assert (progress["attempt"], progress["resumedFromStep"], progress["step"]) == (2, 120, 200)
    resumed = load_model_state(directory / "checkpoints" / "step-200")
    uninterrupted = load_model_state(reference / "checkpoints" / "step-200")
    assert resumed.keys() == uninterrupted.keys()
    for name, tensor in uninterrupted.items():
        assert torch.equal(resumed[name], tensor), f"{name} differs after the resume"
