"""`tjctl sweep run` before and after the trials: what it refuses before anything starts (naming the field), the
line it prints as each trial starts and ends, and the trials ranked by the objective at the end."""

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console
from tests.support.builders import job_manifest, make_sweep, sweep_manifest

from tjctl import local_checks
from tjctl.cli import main
from tjctl.local_configmaps import configmaps_in
from tjctl.sweep_run import changes, ranked, summary
from trainingjob.local.sweep import LocalSweep
from trainingjob.model.sweep import Goal
from trainingjob.model.sweep_status import (
    BestTrial,
    SummarisedTrials,
    SweepPhase,
    TrainingSweepStatus,
    Trial,
    TrialCounts,
    TrialPhase,
)

pytestmark = pytest.mark.fast


def _file(tmp_path: Path, *manifests: dict[str, Any]) -> str:
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump_all(manifests))
    return str(path)


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str], *words: str) -> None:
    try:
        code = main(argv)
    except SystemExit as exited:  # argparse's own refusals
        code = int(exited.code or 0)
    assert code == 2
    err = capsys.readouterr().err
    for word in words:
        assert word in err, err


def _trial(number: int, phase: TrialPhase = TrialPhase.RUNNING, objective: float | None = None, **more: Any) -> Trial:
    return Trial(
        number=number,
        job_name=f"sweep-{number}",
        parameters={"lr": 0.00316, "batch": 64},
        phase=phase,
        objective=objective,
        objective_step=100 if objective is not None else None,
        **more,
    )


@pytest.mark.parametrize(
    ("change", "argv_more", "said"),
    [
        pytest.param(
            {"parameters": [{"name": "lr", "path": "trainer.learningRate", "type": "Float", "min": 1.0, "max": 20.0}]},
            [],
            "spec.parameters[0]: lr=20.0 makes an invalid job",  # 20 is a learning rate the job would refuse
            id="a-value-the-job-refuses",
        ),
        pytest.param({"maxTrials": 0}, [], "is invalid: spec.maxTrials", id="no-trials"),
        pytest.param({}, ["--parallelism", "101"], "is invalid: spec.parallelism", id="parallelism-flag"),
        pytest.param({}, ["--parallelism", "0"], "'0' is not a whole number of 1 or more", id="parallelism-zero"),
    ],
)
def test_a_sweep_that_cannot_run_is_refused_naming_the_field_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict[str, Any], argv_more: list[str], said: str
) -> None:
    manifest = sweep_manifest("bad")
    manifest["spec"].update(change)
    work = tmp_path / "work"
    _refused(["sweep", "run", _file(tmp_path, manifest), "--workdir", str(work), *argv_more], capsys, said)
    assert not work.exists()


def test_a_file_that_is_not_one_sweep_is_refused_saying_which_command_runs_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = _file(tmp_path, job_manifest("j"))
    _refused(["sweep", "run", job], capsys, "runs one TrainingSweep, with any ConfigMaps", "file has a TrainingJob")
    server = ["--server", "http://127.0.0.1:9", "--token", "t"]  # refused before anything is sent
    _refused([*server, "sweep", "submit", job], capsys, "is a TrainingJob, not a TrainingSweep: submit it as a job")
    sweep = _file(tmp_path, sweep_manifest("s"))
    _refused(["run", sweep], capsys, "is a TrainingSweep: run it with tjctl sweep run")
    _refused(["sweep", "run", str(tmp_path / "absent.yaml")], capsys, "absent.yaml: no such file")


def test_without_optuna_the_sweep_is_refused_with_what_to_install(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "optuna", None)  # importlib.util.find_spec("optuna") is None: not installed
    work = tmp_path / "work"
    argv = ["sweep", "run", _file(tmp_path, sweep_manifest("s")), "--workdir", str(work)]
    _refused(argv, capsys, "from Optuna, which this Python lacks", "pip install 'trainingjob[trainer,sweep]'")
    assert not work.exists()


@pytest.mark.parametrize(
    ("before", "after", "lines"),
    [
        pytest.param([], [_trial(0, TrialPhase.PENDING)], ["trial 0 started: lr=0.00316, batch=64"], id="started"),
        pytest.param([_trial(0)], [_trial(0, objective=0.5)], [], id="running-says-nothing"),
        pytest.param(
            [_trial(0)], [_trial(0, TrialPhase.SUCCEEDED, 0.97)], ["trial 0 Succeeded: accuracy 0.9700"], id="succeeded"
        ),
        pytest.param(
            [_trial(0)],
            [_trial(0, TrialPhase.PRUNED, 0.4, reason="PrunedByMedian", message="accuracy 0.4 at step 100 trailed")],
            ["trial 0 Pruned: accuracy 0.4 at step 100 trailed"],
            id="pruned-says-why",
        ),
        pytest.param(
            [],
            [_trial(0, TrialPhase.FAILED, reason="JobFailed")],
            ["trial 0 started: lr=0.00316, batch=64", "trial 0 Failed: JobFailed"],
            id="started-and-failed-between-two-looks",
        ),
        pytest.param(
            [_trial(0, TrialPhase.SUCCEEDED, 0.97)], [_trial(0, TrialPhase.SUCCEEDED, 0.97)], [], id="said-once"
        ),
    ],
)
def test_a_line_for_each_trial_that_starts_or_ends(before: list[Trial], after: list[Trial], lines: list[str]) -> None:
    assert [line.plain for line in changes(before, after, "accuracy")] == lines


@pytest.mark.parametrize(
    ("goal", "order"),
    [pytest.param("Maximize", [2, 0, 1, 3], id="maximize"), pytest.param("Minimize", [1, 0, 2, 3], id="minimize")],
)
def test_the_trials_are_ranked_by_the_objective_whatever_their_phase(goal: str, order: list[int]) -> None:
    sweep = make_sweep(objective={"metric": "loss", "goal": goal})
    assert sweep.spec.objective.goal == Goal(goal)
    trials = [
        _trial(0, TrialPhase.SUCCEEDED, 0.2),
        _trial(1, TrialPhase.PRUNED, 0.1),
        _trial(2, TrialPhase.SUCCEEDED, 0.9),
        _trial(3, TrialPhase.FAILED),
    ]
    console = Console(width=200, record=True)
    console.print(ranked(trials, sweep))
    rows = [line.split() for line in console.export_text().splitlines()]
    assert rows[0] == ["TRIAL", "PHASE", "LOSS", "STEP", "LR", "BATCH"]
    assert [int(row[0]) for row in rows[1:]] == order
    assert rows[1 + order.index(3)][2:] == ["-", "-", "0.00316", "64"]  # no objective yet


def test_the_summary_counts_the_trials_and_names_the_best() -> None:
    status = TrainingSweepStatus(
        phase=SweepPhase.SUCCEEDED,
        trials=[_trial(0, TrialPhase.SUCCEEDED, 0.98), _trial(1, TrialPhase.PRUNED, 0.5)],
        counts=TrialCounts(succeeded=1, pruned=1),
        best_trial=BestTrial(number=0, job_name="sweep-0", parameters={"lr": 0.00316, "batch": 64}, objective=0.98),
    )
    assert summary(status, "accuracy", 70.4) == (
        "Succeeded: 2 trials in 1m10s: 1 succeeded, 1 pruned, 0 failed. Best: trial 0 (sweep-0), accuracy 0.9800"
        " with lr=0.00316, batch=64"
    )


def test_the_summary_counts_the_trials_the_status_summarises_too() -> None:
    status = TrainingSweepStatus(
        phase=SweepPhase.SUCCEEDED,
        trials=[_trial(700, TrialPhase.SUCCEEDED, 0.98)],
        counts=TrialCounts(succeeded=500, pruned=190, failed=11),
        summarised=SummarisedTrials(succeeded=499, pruned=190, failed=11),
    )
    assert summary(status, "accuracy", 60).startswith("Succeeded: 701 trials in 1m00s: 500 succeeded, 190 pruned")


def _mounting(manifest: dict[str, Any], configmap: str) -> dict[str, Any]:
    """`manifest` (a sweep) with its trials' workers mounting the ConfigMap `configmap` at /code."""
    workers = manifest["spec"]["template"]["spec"].setdefault("workers", {})
    workers["volumes"] = [{"name": "code", "configMap": {"name": configmap}}]
    workers["volumeMounts"] = [{"name": "code", "mountPath": "/code"}]
    return manifest


def test_a_sweep_mounting_a_configmap_nowhere_beside_it_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "work"
    sweep = _file(tmp_path, _mounting(sweep_manifest("s"), "recipe"))
    _refused(["sweep", "run", sweep, "--workdir", str(work)], capsys, "mount ConfigMap 'recipe' (volume 'code')")
    assert not work.exists()


@pytest.mark.parametrize("beside", [True, False], ids=["in-a-file-beside", "in-the-same-file"])
def test_a_sweeps_configmaps_reach_its_trials_jobs(tmp_path: Path, beside: bool) -> None:

    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "recipe"}, "data": {"r.py": "x = 1"}}
    sweep = _mounting(sweep_manifest("s"), "recipe")
    if beside:
        (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(configmap))
        path = Path(_file(tmp_path, sweep))
    else:
        path = Path(_file(tmp_path, configmap, sweep))
    manifest, model = local_checks.load_sweep(path)
    found = configmaps_in(path.parent)
    local_checks.check_configmaps(local_checks.trial_job(model), found, "tjctl sweep run")  # no refusal
    local = LocalSweep(manifest, tmp_path / "work", configmaps=found)
    local.create_job("local", {"metadata": {"name": "s-0"}, "spec": {}})
    assert local.jobs["s-0"].configmaps == {"recipe": {"r.py": "x = 1"}}
