"""SIGTERM during slow DDP steps: the final checkpoint and exit 79 come after the step under way, not N steps later.
Counted in steps, not seconds: how long a step, a checkpoint and the exit take depends on the machine."""

import signal
import time
from pathlib import Path

import pytest
from testbed.processes import free_port
from testbed.trainer_procs import Pod, config_json, read_json, start_pod, wait_for

pytestmark = pytest.mark.trainer

STEP_DELAY_SECONDS = 1.0
# The step under way, and one more: the progress file (written at most once a second) may lag the trainer by a
# step. The old loop agreed every 10 steps: SIGTERM at step 1 went on to step 10.
STEPS_AFTER_SIGTERM = 2
GRACE_SECONDS = 30.0  # Kubernetes' default terminationGracePeriodSeconds: SIGKILL after it


def slow_two_rank_env(directory: Path) -> dict[str, str]:
    """One pod with two local ranks whose every step takes STEP_DELAY_SECONDS; no periodic checkpoint."""
    return {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "WORLD_SIZE": "2",
        "TJ_NPROC_PER_POD": "2",
        "TJ_TRAINER_CONFIG": config_json(workload="digits-mlp", steps=1000, batchSize=16),
        "TJ_CHECKPOINT_DIR": str(directory / "checkpoints"),
        "TJ_CHECKPOINT_KEEP": "1",
        "TJ_PROGRESS_FILE": str(directory / "progress.json"),
        "TJ_TEST_STEP_DELAY_SECONDS": str(STEP_DELAY_SECONDS),
    }


def test_sigterm_during_slow_steps_checkpoints_and_exits_79_after_the_step_under_way(
    pods: list[Pod], logs: Path, tmp_path: Path
) -> None:
    pod = start_pod("slow-steps", slow_two_rank_env(tmp_path), logs)
    pods.append(pod)
    at = wait_for(lambda: (read_json(tmp_path / "progress.json") or {}).get("step", 0), 90, "the first step")
    signalled = time.monotonic()
    pod.process.send_signal(signal.SIGTERM)
    code = pod.wait(60)
    took = time.monotonic() - signalled
    assert code == 79, pod.text()
    progress = read_json(tmp_path / "progress.json")
    assert progress is not None and progress["exitCode"] == 79
    assert progress["step"] <= at + STEPS_AFTER_SIGTERM, f"SIGTERM at step {at}, stopped at {progress['step']}"
    assert took < GRACE_SECONDS, f"exited {took:.1f}s after SIGTERM:\n{pod.text()}"
    final = tmp_path / "checkpoints" / f"step-{progress['lastCheckpointStep']}"
    assert (final / "COMPLETE").is_file() and (final / "state.pt").is_file()
