"""The CUDA paths, on a GPU machine only (`pytest -m gpu tests/trainer`; never collected otherwise): NCCL DDP with
bf16 autocast, pinned memory and DataLoader workers, and a parameter-server worker training on the GPU."""

import os
import signal
from pathlib import Path
from typing import Any

import pytest
import torch
from testbed.processes import free_port
from testbed.trainer_procs import (
    AgentGang,
    Pod,
    ddp_env,
    progress_of,
    read_json,
    start_agent_gang,
    start_pod,
    start_ps_job,
    wait_for,
)
from tests.support.trainer_runs import GOAL, shapes

from trainer.agent_http import request_json

pytestmark = pytest.mark.gpu
RUN_TIMEOUT = 300.0


def test_cuda_is_there() -> None:
    assert torch.cuda.is_available(), "the gpu tests need CUDA"


def test_ddp_on_nccl_with_bf16_reaches_the_goal(pods: list[Pod], logs: Path, tmp_path: Path) -> None:
    ranks = min(2, torch.cuda.device_count())
    config = shapes(steps=150, precision="bf16", dataLoaderWorkers=2)
    pod = start_pod("gpu-ddp", ddp_env(free_port(), ranks, ranks, 0, tmp_path, config=config), tmp_path)
    pods.append(pod)
    assert pod.wait(RUN_TIMEOUT) == 0, pod.text()
    assert "on cuda:0 (nccl, attempt 1)" in pod.text()
    assert progress_of(tmp_path)["metrics"]["accuracy"] >= GOAL


def test_parameter_server_workers_train_on_the_gpu(pods: list[Pod], logs: Path, tmp_path: Path) -> None:
    config = shapes(steps=100, precision="bf16")
    servers, workers = start_ps_job(pods, logs, tmp_path, shards=1, workers=2, config=config, wait="60")
    assert [pod.wait(RUN_TIMEOUT) for pod in servers + workers] == [0, 0, 0], "\n".join(p.text() for p in pods)
    assert progress_of(tmp_path)["metrics"]["accuracy"] >= GOAL


def test_a_one_rank_gang_restarts_in_place_on_nccl_with_bf16(pods: list[Pod], logs: Path, tmp_path: Path) -> None:
    """The in-place agent on CUDA: its warm spare (a fork of the pod's zygote, which never touched CUDA) becomes
    attempt 2, joins NCCL through the attempt's prefixed store and resumes from the checkpoint (one rank: one GPU)."""
    config = shapes(steps=300, precision="bf16", dataLoaderWorkers=2)
    directory = tmp_path / "job"
    gang = start_agent_gang(pods, logs, directory, 1, config=config, TJ_TEST_STEP_DELAY_SECONDS="0.02")
    progress_file = directory / "progress.json"
    wait_for(lambda: (read_json(progress_file) or {}).get("lastCheckpointStep"), 120, "a checkpoint")
    status = wait_for(lambda: gang.status_with("child", "spare"), 180, "the warm spare (forked by the zygote)")
    os.kill(status["child"], signal.SIGKILL)
    wait_for(lambda: _gang(gang).get("state") == "failed" or None, 60, "the gang to fail")
    assert request_json(gang.address(0), "POST", "/attempt", body={"attempt": 2}, key=gang.key)[0] == 200
    pod = gang.pods[0]
    assert pod.wait(RUN_TIMEOUT) == 0, pod.text()
    progress = progress_of(directory)
    assert (progress["attempt"], progress["step"]) == (2, 300) and progress["resumedFromStep"] > 0, progress
    assert "on cuda:0 (nccl" in pod.text() and "attempt 2: handed to the warm spare" in pod.text()
    assert progress["metrics"]["accuracy"] >= GOAL


def _gang(gang: AgentGang) -> dict[str, Any]:
    _, view = request_json(gang.address(0), "GET", "/gang")
    return view or {}
