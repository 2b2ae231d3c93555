"""tjctl and local mode end to end: real trainer processes under the real planner, no cluster."""

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from testbed.processes import poll_until
from tests.support.cli import REPO, tjctl, tjctl_env

from trainingjob.generate import crd

pytestmark = pytest.mark.e2e


def test_a_killed_rank_restarts_from_its_checkpoint_and_the_job_succeeds(tmp_path: Path) -> None:
    manifest = yaml.safe_load((REPO / "examples" / "digits-ddp.yaml").read_text())
    manifest["spec"]["trainer"]["steps"] = 300
    manifest["spec"]["checkpoint"]["everySteps"] = 50
    job_file = tmp_path / "job.yaml"
    job_file.write_text(yaml.safe_dump(manifest))
    result = tjctl("run", str(job_file), "--kill", "worker-1@120", "--workdir", str(tmp_path / "work"))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "ChaosKill" in output and "Restarting in place as attempt 2" in output
    assert "the trainer in pod digits-ddp-worker-1-1 exited with code 137" in output  # the killed rank, not its peer
    assert output.count("as attempt 2") == 1  # said once, as an event: no operator log on the console
    assert "RestartedInPlace: Every pod runs attempt 2" in output  # in the same pods: their progress files
    report = json.loads((tmp_path / "work" / "logs" / "digits-ddp-worker-0-1.progress.json").read_text())
    assert report["resumedFromStep"] == 100  # the newest checkpoint before the kill, not step 0
    assert "(SIGKILL) at step 120." in output  # exactly where announced, however fast this machine trains
    assert "resumed from the checkpoint at step 100: 20 steps redone" in output
    assert report["firstStepTime"] <= report["heartbeat"] and report["checkpointStallSeconds"] >= 0
    assert re.search(r"\ngoodput: [01]\.\d+ \| \d+s: .*startup \d+s", output), output  # where the time went
    assert report["step"] == 300
    assert report["accuracy"] >= 0.9
    assert sorted(p.name for p in (tmp_path / "work" / "checkpoints").glob("step-*"))[-1] == "step-300"


def test_the_parameter_server_example_runs_with_its_own_key_and_a_killed_worker_restarts_in_place(
    tmp_path: Path,
) -> None:
    """The job's key reaches every process (a PS pod without one exits 78), readable by this user only; worker 1's
    trainer, killed, restarts inside its pod as its incarnation 2 and the job trains on."""
    example = REPO / "examples" / "digits-ps.yaml"
    workers = yaml.safe_load(example.read_text())["spec"]["workers"]["replicas"]
    result = tjctl("run", str(example), "--kill", "worker-1@100", "--workdir", str(tmp_path / "work"))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "(SIGKILL) at step 100." in output  # the worker stopped itself there, as DDP ranks do
    assert "the trainer in pod digits-ps-worker-1-1 exited with code 137" in output
    assert "Restarting worker 1's trainer in place as its incarnation 2" in output
    assert "RestartedInPlace: Worker 1 runs its incarnation 2" in output
    key = tmp_path / "work" / "job.key"
    assert len(key.read_bytes()) == 32 and key.stat().st_mode & 0o777 == 0o600
    report = json.loads((tmp_path / "work" / "logs" / "digits-ps-worker-0-1.progress.json").read_text())
    assert report["workersDone"] == workers and report["accuracy"] >= 0.9


def test_a_bad_manifest_is_refused_naming_the_field(tmp_path: Path) -> None:
    manifest = yaml.safe_load((REPO / "examples" / "digits-ddp.yaml").read_text())
    manifest["spec"]["workers"]["replicas"] = -2
    job_file = tmp_path / "bad.yaml"
    job_file.write_text(yaml.safe_dump(manifest))
    result = tjctl("run", str(job_file), "--workdir", str(tmp_path / "work"))
    assert result.returncode == 2
    assert "spec.workers.replicas" in result.stdout + result.stderr
    assert not (tmp_path / "work").exists()


def test_a_kill_that_matches_nothing_is_refused_naming_the_flag(tmp_path: Path) -> None:
    result = tjctl("run", str(REPO / "examples" / "digits-ddp.yaml"), "--kill", "worker-7@250", "--workdir",
                   str(tmp_path / "work"))  # fmt: skip
    assert result.returncode == 2 and result.stderr.startswith("error: --kill worker-7@250: the job has 2 workers")
    assert not (tmp_path / "work").exists()


def _processes_with(text: str) -> list[int]:
    """The processes whose environment holds `text` (the trainer processes of one work folder)."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if text.encode() in environ.read_bytes():
                found.append(int(environ.parent.name))
        except OSError:  # gone, or not ours to read
            continue
    return found


def test_ctrl_c_stops_the_run_and_its_processes_without_a_traceback(tmp_path: Path) -> None:
    work = tmp_path / "work"
    # tjctl gets Ctrl-C as a terminal's foreground program does: a test run in the background of a non-interactive
    # shell (CI's, `make test &`) starts with SIGINT ignored, and a child inherits an ignored signal, not a handler.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        run = subprocess.Popen(
            [sys.executable, "-m", "tjctl", "run", str(REPO / "examples" / "digits-ddp.yaml"), "--workdir", str(work)],
            cwd=REPO, env=tjctl_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        poll_until(lambda: _processes_with(str(work)) or None, timeout=60, what="the trainer processes")
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == 130 and "Traceback" not in out + err, out + err
    assert "interrupted" in err
    poll_until(lambda: not _processes_with(str(work)), timeout=30, what="no trainer process left")


def test_crds_prints_the_generated_crd() -> None:
    result = tjctl("crds")
    assert result.returncode == 0, result.stderr
    assert result.stdout == crd.render_all()


@pytest.mark.parametrize("example", ["torchrun-script.yaml"], ids=["torchrun-script"])
def test_the_teaching_examples_run_as_shipped(tmp_path: Path, example: str) -> None:
    """From any folder: the ConfigMap's code comes from the manifest's folder, torchrun from the environment. (The
    recipes' examples run as their docs show them, accuracy checked: tests/e2e/test_doc_commands.py.)"""
    result = tjctl("run", str(REPO / "examples" / example), "--workdir", str(tmp_path / "work"), cwd=tmp_path)
    output = result.stdout + result.stderr
    logs = "".join(path.read_text() for path in (tmp_path / "work" / "logs").glob("*.log"))
    assert result.returncode == 0 and "Succeeded" in output, output + logs
    if example == "torchrun-script.yaml":
        assert set(re.findall(r"rank (\d) of 4: epoch 2 loss", logs)) == {"0", "1", "2", "3"}, logs
    else:
        accuracy = re.search(r"result: accuracy (\d\.\d+)", output)
        assert accuracy and float(accuracy.group(1)) >= 0.9, output
