"""The CUDA paths, on a GPU machine only (`pytest -m gpu tests/trainer`; never collected otherwise): NCCL DDP with
bf16 autocast, pinned memory and DataLoader workers, and a parameter-server worker training on the GPU."""

from pathlib import Path

import pytest
import torch
from testbed.processes import free_port
from testbed.trainer_procs import Pod, ddp_env, progress_of, start_pod, start_ps_job
from tests.support.trainer_runs import GOAL, shapes

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
    assert "on cuda:0 (nccl)" in pod.text()
    assert progress_of(tmp_path)["metrics"]["accuracy"] >= GOAL


def test_parameter_server_workers_train_on_the_gpu(pods: list[Pod], logs: Path, tmp_path: Path) -> None:
    config = shapes(steps=100, precision="bf16")
    servers, workers = start_ps_job(pods, logs, tmp_path, shards=1, workers=2, config=config, wait="60")
    assert [pod.wait(RUN_TIMEOUT) for pod in servers + workers] == [0, 0, 0], "\n".join(p.text() for p in pods)
    assert progress_of(tmp_path)["metrics"]["accuracy"] >= GOAL
