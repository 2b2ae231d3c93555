"""What `tjctl run` refuses before it starts anything: a --kill that names no replica of the job or a step it never
reaches, a file that is not one valid TrainingJob, and a machine without the programs the job's pods run."""

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.support.builders import claim_manifest, job_manifest

from tjctl import local_checks
from tjctl.cli import main
from tjctl.exits import UsageError
from tjctl.local_configmaps import configmaps_in
from trainingjob.local.cluster import Chaos
from trainingjob.model import TrainingJob

pytestmark = pytest.mark.fast

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _file(tmp_path: Path, *manifests: dict[str, Any]) -> str:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump_all(manifests))
    return str(path)


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str], *words: str) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    for word in words:
        assert word in err, err
    return err


@pytest.mark.parametrize(
    ("kill", "said"),
    [
        pytest.param("worker-2@50", "--kill worker-2@50: the job has 2 workers (worker-0 to worker-1)", id="no-worker"),
        pytest.param("ps-0@50", "--kill ps-0@50: the job has no parameter servers", id="ps-in-ddp"),
        pytest.param("worker-1@100", "--kill worker-1@100: the step must be 1 to 99", id="the-last-step"),
        pytest.param("worker-1@0", "the step must be 1 to 99 (the trainer runs 100 steps)", id="step-0"),
        pytest.param("chief-0@5", "--kill chief-0@5: replica 'chief-0' is not <role>-<index>", id="no-such-role"),
        pytest.param("worker-1", "--kill worker-1: expected REPLICA@STEP", id="no-step"),
        pytest.param("worker-1@-3", "expected REPLICA@STEP", id="negative"),
    ],
)
def test_a_kill_that_would_never_happen_is_refused_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kill: str, said: str
) -> None:
    work = tmp_path / "work"
    _refused(["run", _file(tmp_path, job_manifest("k")), "--kill", kill, "--workdir", str(work)], capsys, said)
    assert not work.exists()


def test_a_kill_of_a_parameter_server_is_checked_against_their_number(tmp_path: Path) -> None:
    job = TrainingJob.from_manifest(job_manifest("p", mode="ParameterServer", servers=2))
    assert local_checks.chaos("ps-1@10", job) == Chaos("ps-1", 10)
    with pytest.raises(UsageError, match=r"2 parameter servers \(ps-0 to ps-1\)"):
        local_checks.chaos("ps-2@10", job)
    own_command = TrainingJob.from_manifest(job_manifest("c", trainer=None, workers={"replicas": 2, "command": ["x"]}))
    assert local_checks.chaos("worker-1@123456", own_command) == Chaos("worker-1", 123456)  # no steps


def test_a_file_that_is_not_one_valid_named_job_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    two = _file(tmp_path, job_manifest("a"), job_manifest("b"))
    _refused(["run", two], capsys, "tjctl run runs one TrainingJob, with any ConfigMaps it mounts; this file has 2 doc")
    claim = claim_manifest()
    with_claim = _file(tmp_path, claim, job_manifest("a"))
    _refused(["run", with_claim], capsys, "(a PersistentVolumeClaim, a TrainingJob): local mode needs no claim")
    _refused(["run", _file(tmp_path, claim)], capsys, "runs one TrainingJob, with any", "has a PersistentVolumeClaim")
    unnamed = job_manifest("x")
    unnamed["metadata"] = {"generateName": "x-"}
    _refused(["run", _file(tmp_path, unnamed)], capsys, "metadata.name is required")
    _refused(["run", str(tmp_path / "absent.yaml")], capsys, "absent.yaml: no such file")
    bad = job_manifest("bad", workers={"replicas": 0})
    err = _refused(["run", _file(tmp_path, bad)], capsys, "is invalid: spec.workers.replicas")
    assert "\n  spec.workers.replicas: " in err  # and what is wrong with it, on a line of its own


def test_without_pytorch_the_built_in_trainer_is_refused_with_what_to_install(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # importlib.util.find_spec("torch") is None: not installed
    work = tmp_path / "work"
    argv = ["run", str(EXAMPLES / "digits-ddp.yaml"), "--workdir", str(work)]
    _refused(argv, capsys, "the built-in trainer needs PyTorch", "pip install 'trainingjob[trainer]'")
    assert not work.exists()


def test_without_torchrun_a_torchrun_job_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_checks, "BESIDE_PYTHON", tmp_path)  # no torchrun beside this Python
    monkeypatch.setenv("PATH", str(tmp_path))  # nor on PATH
    _refused(["run", str(EXAMPLES / "torchrun-script.yaml")], capsys, "runs torchrun, which is neither beside")
    own = job_manifest("own", trainer=None, workers={"replicas": 1, "command": ["no-such-program-here"]})
    _refused(["run", _file(tmp_path, own)], capsys, "'no-such-program-here', which is not on PATH")


@pytest.mark.parametrize("command", ["run", "sweep run"])
def test_a_named_workdir_holding_files_tjctl_did_not_make_is_refused_and_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    work = tmp_path / "project"
    (work / "logs").mkdir(parents=True)
    (work / "logs" / "mine.txt").write_text("keep me")
    example = EXAMPLES / ("digits-ddp.yaml" if command == "run" else "digits-sweep.yaml")
    _refused([*command.split(), str(example), "--workdir", str(work)], capsys, f"--workdir {work}: the folder holds")
    assert (work / "logs" / "mine.txt").read_text() == "keep me"


def test_tjctls_own_workdir_is_marked_and_cleared_of_what_a_run_left(tmp_path: Path) -> None:
    work, outside = tmp_path / "work", tmp_path / "outside"
    local_checks.claim_workdir(work, named=True)  # new: made and marked
    (work / "logs").mkdir()
    (work / "checkpoints").mkdir()
    outside.mkdir()
    (outside / "data").write_text("not tjctl's")
    (work / "volumes").symlink_to(outside)
    local_checks.claim_workdir(work, named=True)  # marked: tjctl's, whatever it holds
    local_checks.clear_workdir(work, ("volumes", "logs"))
    assert sorted(p.name for p in work.iterdir()) == [".tjctl-workdir", "checkpoints"]
    assert (outside / "data").read_text() == "not tjctl's"  # a link is removed, not followed
    local_checks.clear_workdir(work)
    assert [p.name for p in work.iterdir()] == [".tjctl-workdir"]
    default = tmp_path / ".tjctl" / "job"
    default.mkdir(parents=True)
    (default / "from-an-older-tjctl").write_text("")
    local_checks.claim_workdir(default, named=False)  # the default folder is tjctl's without its mark
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError, match="not a folder"):
        local_checks.claim_workdir(tmp_path / "file", named=True)


def test_a_job_with_its_configmap_in_the_same_file_runs_and_a_missing_one_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = job_manifest("j")
    job["spec"]["workers"]["volumes"] = [{"name": "code", "configMap": {"name": "recipe"}}]
    job["spec"]["workers"]["volumeMounts"] = [{"name": "code", "mountPath": "/code"}]
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "recipe"}, "data": {"r.py": "x = 1"}}
    path = Path(_file(tmp_path, configmap, job))
    manifest, model = local_checks.load(path)
    assert manifest["kind"] == "TrainingJob" and model.metadata.name == "j"
    local_checks.check_configmaps(model, configmaps_in(tmp_path), "tjctl run")  # found in the same file
    alone = tmp_path / "alone"
    alone.mkdir()
    _refused(["run", _file(alone, job), "--workdir", str(alone / "work")], capsys, "mount ConfigMap 'recipe'")
    assert not (alone / "work").exists()


@pytest.mark.parametrize("capacity", ["0", "-1", "two", "4,2", "4,2@150,4@100", "4@0,2@0"])
def test_a_capacity_that_is_not_a_number_of_pods_is_refused_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], capacity: str
) -> None:
    argv = ["run", _file(tmp_path, job_manifest("k")), f"--capacity={capacity}", "--workdir", str(tmp_path / "w")]
    with pytest.raises(SystemExit) as done:
        main(argv)
    err = capsys.readouterr().err
    assert done.value.code == 2 and "--capacity" in err and ("at least 1" in err or "increase" in err), err
    assert not (tmp_path / "w").exists()  # nothing started
