"""A user's torchrun script: unmodified under torchrun with the operator's PET_* variables, and under us."""

import subprocess
import sys
from pathlib import Path

import pytest
from testbed.processes import free_port
from testbed.trainer_procs import REPO, Pod, base_env, read_json, start_pod

pytestmark = pytest.mark.trainer

SCRIPT = str(REPO / "tests" / "trainer" / "user_script.py")


def test_torchrun_script_runs_and_resumes_under_the_trainer(pods: list[Pod], logs: Path, tmp_path: Path) -> None:
    shared = {"TJ_CHECKPOINT_DIR": str(tmp_path / "checkpoints"), "TJ_PROGRESS_FILE": str(tmp_path / "p.json")}
    operator_env = {
        "PET_NNODES": "1",
        "PET_NPROC_PER_NODE": "2",
        "PET_NODE_RANK": "0",
        "PET_MASTER_ADDR": "127.0.0.1",
        "PET_MASTER_PORT": str(free_port()),
        **shared,
    }
    torchrun = str(Path(sys.executable).with_name("torchrun"))
    done = subprocess.run(
        [torchrun, SCRIPT, "20"], env=base_env(operator_env), capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    progress = read_json(tmp_path / "p.json")
    assert progress is not None
    assert (progress["step"], progress["worldSize"], progress["finished"]) == (20, 2, True)
    assert (tmp_path / "checkpoints" / "step-20" / "COMPLETE").is_file()

    ours = {"TJ_NPROC_PER_POD": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), **shared}
    pod = start_pod("user-script", ours, logs, args=(SCRIPT, "30"))
    pods.append(pod)
    assert pod.wait(120) == 0, pod.text()
    progress = read_json(tmp_path / "p.json")
    assert progress is not None
    assert (progress["resumedFromStep"], progress["step"], progress["finished"]) == (20, 30, True)
