"""A sweep trial's trainer removes the finished trials' checkpoint folders it is told to, and nothing else: only
<job name>/<job uid> folders of its own sweep directly under the checkpoint root, never its own, never through a
symbolic link or '..', whatever the (hostile) list says; it reports the named folders that are gone. A sweep's
sweeper (`python -m trainer --remove-checkpoints <sweep>`) does the same and nothing else."""

import json
import os
from pathlib import Path
from typing import Any

import pytest

from trainer import contract as c
from trainer import helpers, launcher
from trainer.checkpoint_cleanup import parse, remove_folders, sweep_of
from trainer.env import CheckpointPolicy, TrainerEnv
from trainer.progress_endpoint import final_report
from trainer.reporting import RunReport

pytestmark = pytest.mark.fast

OWN = "sweep-7"


def _tree(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The checkpoint root with three trials' folders, this job's own, another sweep's, and a folder outside."""
    root = tmp_path / "checkpoints"
    for folder in ("sweep-1/uid-1", "sweep-2/uid-2", "sweep-3/uid-3", f"{OWN}/uid-7", "other-1/uid-o", "sweep/uid-s"):
        (root / folder / "step-10").mkdir(parents=True)
        (root / folder / "step-10" / "state.pt").write_bytes(b"x")
    outside = tmp_path / "outside"
    (outside / "keep").mkdir(parents=True)
    (outside / "keep" / "precious").write_bytes(b"y")
    return root, root / OWN / "uid-7", outside


def _left(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.glob("*/*")}


def test_the_named_folders_of_its_sweep_go_and_are_reported_with_those_already_gone(tmp_path: Path) -> None:
    root, own, _ = _tree(tmp_path)
    gone = remove_folders(own, OWN, ["sweep-1/uid-1", "sweep-2/uid-2", "sweep-4/uid-never-written"])
    assert gone == ["sweep-1/uid-1", "sweep-2/uid-2", "sweep-4/uid-never-written"]
    assert _left(root) == {"sweep-3/uid-3", f"{OWN}/uid-7", "other-1/uid-o", "sweep/uid-s"}
    assert not (root / "sweep-1").exists()  # the job's folder too, once empty


@pytest.mark.parametrize(
    "entry",
    [
        pytest.param("../outside/keep", id="dot-dot-up"),
        pytest.param("sweep-1/../../outside", id="dot-dot-inside"),
        pytest.param("sweep-1/uid-1/../../../outside/keep", id="dot-dot-deep"),
        pytest.param(str(Path("/") / "tmp"), id="absolute"),
        pytest.param("sweep-1", id="a-whole-job-folder"),
        pytest.param("sweep-1/uid-1/step-10", id="deeper-than-a-uid"),
        pytest.param("other-1/uid-o", id="another-sweeps-trial"),
        pytest.param("sweep/uid-s", id="not-a-trial"),
        pytest.param(f"{OWN}/uid-7", id="its-own"),
        pytest.param("sweep-1/.", id="dot"),
        pytest.param("sweep-1/uid-1\x00", id="nul"),
        pytest.param(["sweep-1/uid-1"], id="not-a-string"),
    ],
)
def test_a_hostile_entry_removes_nothing(tmp_path: Path, entry: Any) -> None:
    root, own, outside = _tree(tmp_path)
    before = _left(root)
    assert remove_folders(own, OWN, [entry]) == []
    assert _left(root) == before and (outside / "keep" / "precious").exists()


def test_a_symbolic_link_is_never_followed_out_of_the_root(tmp_path: Path) -> None:
    root, own, outside = _tree(tmp_path)
    (root / "sweep-5").mkdir()
    os.symlink(outside / "keep", root / "sweep-5" / "uid-5")  # the uid a link to a folder outside
    os.symlink(outside, root / "sweep-6")  # the job's folder a link
    (outside / "uid-6").mkdir()
    (root / "sweep-3" / "uid-3" / "escape").symlink_to(outside / "keep")  # a link inside a folder that goes
    assert remove_folders(own, OWN, ["sweep-5/uid-5", "sweep-6/uid-6", "sweep-3/uid-3"]) == ["sweep-3/uid-3"]
    assert (outside / "keep" / "precious").exists() and (outside / "uid-6").is_dir()
    assert (root / "sweep-5" / "uid-5").is_symlink() and (root / "sweep-6").is_symlink()


def test_a_job_not_named_as_a_sweeps_trial_removes_nothing(tmp_path: Path) -> None:
    root, _, _ = _tree(tmp_path)
    before = _left(root)
    assert remove_folders(root / "train" / "uid", "train", ["sweep-1/uid-1"]) == []
    assert _left(root) == before


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        pytest.param('["a-1/u"]', ["a-1/u"], id="list"),
        pytest.param("", [], id="empty"),
        pytest.param('{"a": 1}', [], id="object"),
        pytest.param("[", [], id="broken"),
    ],
)
def test_the_variable_is_a_json_list_or_nothing(raw: str, named: list[Any]) -> None:
    assert parse(raw) == named


@pytest.mark.parametrize(
    ("job", "sweep"),
    [
        pytest.param("s-12", "s", id="trial"),
        pytest.param("a-b-3", "a-b", id="dashed"),
        pytest.param("s", None, id="x"),
        pytest.param("s-x", None, id="no-number"),
        pytest.param("-3", None, id="no-sweep"),
    ],
)
def test_a_trials_sweep_is_its_job_name_less_its_number(job: str, sweep: str | None) -> None:
    assert sweep_of(job) == sweep


def _told(tmp_path: Path, own: Path, folders: list[str]) -> TrainerEnv:
    """Rank 0's environment: its checkpoint folder `own`, its progress file, the folders it is told to remove."""
    progress = tmp_path / "progress.json"
    return TrainerEnv(
        job_name=OWN,
        checkpoint=CheckpointPolicy(directory=own),
        progress_file=progress,
        remove_checkpoints=json.dumps(folders),
    )


def _reported(env: TrainerEnv) -> Any:
    assert env.progress_file is not None
    return json.loads(env.progress_file.read_text())["checkpointsCleared"]


def test_rank_0_removes_them_as_it_starts_and_reports_them(tmp_path: Path) -> None:
    root, own, _ = _tree(tmp_path)
    env = _told(tmp_path, own, ["sweep-1/uid-1", "../outside"])
    report = RunReport(env, is_reporter=True)
    try:
        report.start(0, 100)
        assert _reported(env) == ["sweep-1/uid-1"]
    finally:
        report.close()
    assert not (root / "sweep-1").exists() and (root / "sweep-2" / "uid-2").exists()


def test_a_script_of_its_own_does_the_same_with_the_helpers_reporter(tmp_path: Path) -> None:
    root, own, _ = _tree(tmp_path)
    env = _told(tmp_path, own, ["sweep-2/uid-2"])
    reporter = helpers.progress_reporter(env)
    assert reporter is not None
    try:
        reporter.report(1, 0.5, 8)
        assert _reported(env) == ["sweep-2/uid-2"]
    finally:
        reporter.close()
    assert not (root / "sweep-2").exists() and (root / "sweep-1" / "uid-1").exists()


def _sweeper_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, folders: list[str]) -> Path:
    """The variables the operator gives a sweeper's rank 0 (its checkpoint folder is never written), with a trainer
    config whose recipe would leave a mark if anything loaded it; the progress file."""
    recipe = tmp_path / "recipe.py"
    recipe.write_text(f"open({str(tmp_path / 'loaded')!r}, 'w').close()\ndef recipe(config): raise SystemExit(3)\n")
    progress = tmp_path / "progress.json"
    variables = {
        c.JOB_NAME: "sweep-sweeper",
        c.CHECKPOINT_DIR: str(tmp_path / "checkpoints" / "sweep-sweeper" / "uid-s"),
        c.REMOVE_CHECKPOINTS: json.dumps(folders),
        c.PROGRESS_FILE: str(progress),
        c.TRAINER_CONFIG: json.dumps({"entrypoint": f"{recipe}:recipe", "steps": 10}),
    }
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    return progress


def test_the_sweeper_removes_only_the_named_folders_of_its_sweep_and_trains_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _, outside = _tree(tmp_path)
    named = ["sweep-1/uid-1", "sweep-3/uid-3", "other-1/uid-o", "../outside/keep"]
    progress = _sweeper_env(monkeypatch, tmp_path, named)
    assert launcher.run([c.SWEEPER_FLAG, "sweep"]) == c.ExitCode.SUCCEEDED
    assert _left(root) == {"sweep-2/uid-2", f"{OWN}/uid-7", "other-1/uid-o", "sweep/uid-s"}
    assert (outside / "keep" / "precious").exists()
    report = json.loads(progress.read_text())
    assert report["checkpointsCleared"] == ["sweep-1/uid-1", "sweep-3/uid-3"] and report["finished"] is True
    assert report["step"] == 0 and "totalSteps" not in report  # it trained nothing
    assert not (tmp_path / "loaded").exists()  # the recipe was never loaded
    assert not (root / "sweep-sweeper").exists()  # nor its own checkpoint folder made


def test_a_sweeper_without_its_sweeps_name_fails_as_misconfigured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _, _ = _tree(tmp_path)
    _sweeper_env(monkeypatch, tmp_path, ["sweep-1/uid-1"])
    assert launcher.main([c.SWEEPER_FLAG]) == c.ExitCode.PERMANENT
    assert "sweep-1/uid-1" in _left(root)


def test_the_sweepers_final_report_names_every_folder_it_removed() -> None:
    folders = [f"{'s' * 36}-{n}/{'u' * 36}" for n in range(40)]  # as many and as long as a sweeper is told
    body = json.loads(final_report({"attempt": 1, "step": 0, "finished": True, "checkpointsCleared": folders}))
    assert body["checkpointsCleared"] == folders
