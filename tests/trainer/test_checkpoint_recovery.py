"""Checkpoints under failure: a crash mid-write, corrupt and partial folders, SIGTERM's final checkpoint."""

import json
import signal
from pathlib import Path

import pytest
from testbed.trainer_procs import Pod, config_json, read_json, single_pod_env, start_pod, wait_for

pytestmark = pytest.mark.trainer

RUN_TIMEOUT = 120.0


def single_env(directory: Path, config: str, **extra: str) -> dict[str, str]:
    """One pod holding the whole job: a checkpoint every 40 steps, the newest 5 kept."""
    return single_pod_env(directory, config, **{"TJ_CHECKPOINT_EVERY_STEPS": "40", "TJ_CHECKPOINT_KEEP": "5", **extra})


def plant_corrupt_and_partial(checkpoints: Path) -> None:
    """step-120 claims to be complete but holds garbage; step-160 never got its marker."""
    corrupt = checkpoints / "step-120"
    corrupt.mkdir()
    (corrupt / "state.pt").write_bytes(b"not a checkpoint")
    (corrupt / "COMPLETE").write_text(json.dumps({"step": 120, "bytes": 16, "sha256": "0" * 64}))
    partial = checkpoints / "step-160"
    partial.mkdir()
    (partial / "state.pt").write_bytes(b"half")


def test_crash_during_a_write_resumes_from_the_previous_complete_checkpoint(
    pods: list[Pod], logs: Path, tmp_path: Path
) -> None:
    config = config_json(workload="digits-mlp", steps=200, batchSize=32, learningRate=0.1, momentum=0.9)
    checkpoints = tmp_path / "checkpoints"
    crashed = start_pod("crash", single_env(tmp_path, config, TJ_TEST_CRASH_BEFORE_RENAME_STEP="80"), logs)
    pods.append(crashed)
    assert crashed.wait(RUN_TIMEOUT) == 137, crashed.text()
    leftovers = [path for path in checkpoints.iterdir() if path.name.startswith(".tmp-step-80")]
    assert len(leftovers) == 1 and (leftovers[0] / "state.pt").is_file()
    assert sorted(path.name for path in checkpoints.iterdir() if path.name.startswith("step-")) == ["step-40"]
    plant_corrupt_and_partial(checkpoints)

    resumed = start_pod("resume", single_env(tmp_path, config, TJ_ATTEMPT="2"), logs)
    pods.append(resumed)
    assert resumed.wait(RUN_TIMEOUT) == 0, resumed.text()
    assert "skipping corrupt checkpoint" in resumed.text() and "step-120" in resumed.text()
    progress = read_json(tmp_path / "progress.json")
    assert progress is not None
    assert (progress["resumedFromStep"], progress["step"], progress["finished"]) == (40, 200, True)
    names = sorted(path.name for path in checkpoints.iterdir() if path.name.startswith("step-"))
    assert names == ["step-120", "step-160", "step-200", "step-40", "step-80"]
    assert all((checkpoints / name / "COMPLETE").is_file() for name in names)
    # The history reads as one run: the crashed attempt's lines past step 40 were dropped on resume.
    history = [json.loads(line) for line in (checkpoints / "metrics.jsonl").read_text().splitlines()]
    train_steps = [line["step"] for line in history if line["kind"] == "train"]
    assert train_steps == list(range(1, 201)), train_steps
    assert [line["step"] for line in history if line["kind"] == "eval"] == [200]


def test_sigterm_writes_a_final_checkpoint_and_exits_preempted(pods: list[Pod], logs: Path, tmp_path: Path) -> None:
    config = config_json(workload="digits-cnn", steps=1_000_000, batchSize=16, optimizer="adam", learningRate=0.001)
    env = single_env(tmp_path, config, TJ_NPROC_PER_POD="2", WORLD_SIZE="2", TJ_CHECKPOINT_EVERY_STEPS="")
    pod = start_pod("preempted", env, logs)
    pods.append(pod)
    wait_for(lambda: (read_json(tmp_path / "progress.json") or {}).get("step", 0) >= 20, 90, "training to start")
    pod.process.send_signal(signal.SIGTERM)
    assert pod.wait(60) == 79, pod.text()
    progress = read_json(tmp_path / "progress.json")
    assert progress is not None and progress["exitCode"] == 79
    step = progress["lastCheckpointStep"]
    assert isinstance(step, int) and 20 <= step < 1_000_000
    final = tmp_path / "checkpoints" / f"step-{step}"
    assert (final / "COMPLETE").is_file() and (final / "state.pt").is_file()
