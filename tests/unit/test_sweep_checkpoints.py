"""The checkpoint folders of a sweep's finished trials: which a new trial is told to remove (the finished ones past
their pods' grace, all but the keepBestCheckpoints best, on a shared volume), how the sweep records the ones its
trials reported gone, and what reaches rank 0's trainer from the annotation (anyone may write it)."""

import json
from datetime import timedelta
from typing import Any

import pytest
from pydantic import ValidationError
from tests.support.builders import SWEEP_UID, T0, at, make_sweep, sweep_manifest, sweep_step, trial_job

from trainingjob.children import contract
from trainingjob.children.naming import Replica
from trainingjob.children.progress_report import progress_from_report
from trainingjob.children.specs import environment
from trainingjob.model import TrainingJob
from trainingjob.model.sweep import TrainingSweep
from trainingjob.model.sweep_status import Trial, TrialPhase
from trainingjob.sweep.checkpoints import MAX_REMOVALS, REMOVE_ANNOTATION, marked, to_remove, told
from trainingjob.sweep.trial_jobs import trial_manifest
from trainingjob.sweep.trials import Child

pytestmark = pytest.mark.fast

PVC = {"volume": {"persistentVolumeClaim": {"claimName": "ckpt"}}, "everySteps": 10}
EMPTY_DIR = {"volume": {"emptyDir": {}}, "everySteps": 10}
GRACE = 120  # the workers' default terminationGracePeriodSeconds
LATER = T0 + timedelta(seconds=GRACE)


def _spec(checkpoint: dict[str, Any] | None = PVC, **spec: Any) -> Any:
    manifest = sweep_manifest(**spec)
    if checkpoint is not None:
        manifest["spec"]["template"]["spec"]["checkpoint"] = checkpoint
    return TrainingSweep.from_manifest(manifest).spec


def _trial(number: int, phase: TrialPhase, objective: float | None = None, **fields: Any) -> Trial:
    values: dict[str, Any] = {"job_uid": f"uid-{number}", "completion_time": T0 if phase.is_finished else None}
    values.update(fields)
    return Trial(number=number, job_name=f"sweep-{number}", parameters={}, phase=phase, objective=objective, **values)


S, F, P, R = TrialPhase.SUCCEEDED, TrialPhase.FAILED, TrialPhase.PRUNED, TrialPhase.RUNNING
TRIALS = [_trial(0, S, 0.9), _trial(1, S, 0.7), _trial(2, F), _trial(3, P, 0.2), _trial(4, R, 0.5)]


@pytest.mark.parametrize(
    ("checkpoint", "spec", "trials", "now", "named"),
    [
        pytest.param(PVC, {}, TRIALS, LATER, ["sweep-1/uid-1", "sweep-2/uid-2", "sweep-3/uid-3"], id="keep-the-best"),
        pytest.param(
            PVC, {"keepBestCheckpoints": 0}, TRIALS, LATER, [f"sweep-{n}/uid-{n}" for n in range(4)], id="keep-none"
        ),
        pytest.param(PVC, {"keepBestCheckpoints": 2}, TRIALS, LATER, ["sweep-2/uid-2", "sweep-3/uid-3"], id="keep-two"),
        pytest.param(
            PVC,
            {"objective": {"metric": "accuracy", "goal": "Minimize"}},
            TRIALS,
            LATER,
            ["sweep-0/uid-0", "sweep-2/uid-2", "sweep-3/uid-3"],
            id="best-by-the-goal",
        ),
        pytest.param(PVC, {}, TRIALS, LATER - timedelta(seconds=1), [], id="pods-within-their-grace"),
        pytest.param(None, {}, TRIALS, LATER, [], id="no-checkpoint-volume"),
        pytest.param(EMPTY_DIR, {}, TRIALS, LATER, [], id="empty-dir-goes-with-its-pods"),
        pytest.param(PVC, {}, [_trial(0, S, 0.9), _trial(1, F, checkpoint_removed=True)], LATER, [], id="already-gone"),
        pytest.param(PVC, {}, [_trial(0, S, 0.9), _trial(1, F, job_uid=None)], LATER, [], id="uid-never-seen"),
        pytest.param(
            PVC,
            {},
            [_trial(n, F) for n in range(MAX_REMOVALS + 5)],
            LATER,
            [f"sweep-{n}/uid-{n}" for n in range(MAX_REMOVALS)],
            id="at-most-max-removals-oldest-first",
        ),
    ],
)
def test_a_new_trial_is_told_to_remove_the_finished_trials_folders_but_the_best(
    checkpoint: dict[str, Any] | None, spec: dict[str, Any], trials: list[Trial], now: Any, named: list[str]
) -> None:
    assert list(to_remove(_spec(checkpoint, **spec), trials, now)) == named


def test_keep_best_checkpoints_is_checked_at_admission_naming_the_field() -> None:
    with pytest.raises(ValidationError) as refused:
        _spec(keepBestCheckpoints=-1)
    assert "keepBestCheckpoints" in str(refused.value) or "keep_best_checkpoints" in str(refused.value)


def _reporting(child: Child, cleared: list[str]) -> Child:
    assert child.job is not None and child.job.status is not None
    progress = progress_from_report({"step": 5, "checkpointsCleared": cleared})[0]
    status = child.job.status.model_copy(update={"progress": progress})
    return Child(child.name, child.owner_uid, child.job.model_copy(update={"status": status}), None, False, child.uid)


def test_the_sweep_records_the_folders_a_trial_reported_gone_and_counts_them() -> None:
    sweep, _ = sweep_step(make_sweep(parallelism=2, maxTrials=4), [])
    done = trial_job(sweep, 0, "Failed")
    sweep, _ = sweep_step(sweep, [done, trial_job(sweep, 1)], at(1))
    assert sweep.status is not None and sweep.status.trials[0].job_uid == "job-0"
    another = "sweep-0/some-other-uid"  # a namesake's folder: not this trial's
    reporting = _reporting(trial_job(sweep, 2), [another])
    sweep, _ = sweep_step(sweep, [done, trial_job(sweep, 1), reporting], at(2))
    assert sweep.status is not None and not sweep.status.trials[0].checkpoint_removed
    reporting = _reporting(trial_job(sweep, 2), ["sweep-0/job-0"])
    sweep, _ = sweep_step(sweep, [done, trial_job(sweep, 1), reporting], at(3))
    assert sweep.status is not None and sweep.status.trials[0].checkpoint_removed
    assert sweep.status.checkpoints_removed == 1


def test_a_finished_trials_uid_is_taken_from_its_job_when_it_was_never_recorded() -> None:
    trial = _trial(0, F, job_uid=None)
    child = Child("sweep-0", SWEEP_UID, None, None, False, "uid-late")
    assert marked([trial], {"sweep-0": child})[0].job_uid == "uid-late"


def _sweep_with_checkpoints(**spec: Any) -> TrainingSweep:
    manifest = sweep_manifest(parallelism=1, maxTrials=4, **spec)
    manifest["spec"]["template"]["spec"]["checkpoint"] = PVC
    manifest["metadata"].update(namespace="ns", uid=SWEEP_UID, generation=1, resourceVersion="1")
    return TrainingSweep.from_manifest(manifest)


def test_the_trial_after_a_finished_one_gets_the_annotation_and_its_rank_0_the_folders() -> None:
    sweep, _ = sweep_step(_sweep_with_checkpoints(keepBestCheckpoints=0), [])
    sweep, _ = sweep_step(sweep, [trial_job(sweep, 0)], at(1))
    failed = trial_job(sweep, 0, "Failed")
    sweep, result = sweep_step(sweep, [failed], at(2))  # trial 1 created within trial 0's grace: told nothing
    assert [t.number for t in result.create] == [1] and not result.removals
    sweep, _ = sweep_step(sweep, [failed, trial_job(sweep, 1, "Failed")], at(2 + GRACE))
    sweep, result = sweep_step(sweep, [failed, trial_job(sweep, 1, "Failed")], at(2 + GRACE))
    assert [t.number for t in result.create] == [2] and result.removals == ("sweep-0/job-0",)
    manifest = trial_manifest(sweep, result.create[0], result.removals)
    assert json.loads(manifest["metadata"]["annotations"][REMOVE_ANNOTATION]) == ["sweep-0/job-0"]
    job = TrainingJob.from_manifest({**manifest, "metadata": {**manifest["metadata"], "uid": "job-2"}})
    assert json.loads(environment(job, Replica("worker", 0), 1)[contract.REMOVE_CHECKPOINTS]) == ["sweep-0/job-0"]
    assert contract.REMOVE_CHECKPOINTS not in environment(job, Replica("worker", 1), 1)


@pytest.mark.parametrize(
    ("value", "folders"),
    [
        pytest.param('["sweep-0/uid-0"]', ["sweep-0/uid-0"], id="well-formed"),
        pytest.param('["../etc/x", "sweep-0/../..", "/abs/x", "sweep-0/a/b", "sweep-0/.."]', [], id="traversal"),
        pytest.param('["Sweep-0/uid", "sweep-0/", "/uid", 7, null]', [], id="not-a-job-and-uid"),
        pytest.param('{"sweep-0/uid-0": 1}', [], id="not-a-list"),
        pytest.param("not json", [], id="not-json"),
        pytest.param(
            json.dumps([f"s-{n}/u" for n in range(100)]),
            [f"s-{n}/u" for n in range(MAX_REMOVALS)],
            id="at-most-max-removals",
        ),
    ],
)
def test_only_well_formed_folders_reach_the_trainer_from_the_annotation(value: str, folders: list[str]) -> None:
    assert told({REMOVE_ANNOTATION: value}) == folders


@pytest.mark.parametrize(
    ("said", "recorded"),
    [
        pytest.param(["sweep-0/uid-0"], ["sweep-0/uid-0"], id="well-formed"),
        pytest.param(["../x/y", "sweep-0/uid-0", 5, "a/b/c"], ["sweep-0/uid-0"], id="malformed-dropped"),
        pytest.param("sweep-0/uid-0", None, id="not-a-list"),
        pytest.param([f"s-{n}/u" for n in range(100)], [f"s-{n}/u" for n in range(MAX_REMOVALS)], id="bounded"),
    ],
)
def test_the_folders_a_trainer_reports_gone_are_read_as_untrusted_input(said: Any, recorded: Any) -> None:
    progress = progress_from_report({"step": 1, "checkpointsCleared": said})[0]
    assert progress is not None and progress.checkpoints_cleared == recorded


def test_only_the_sweep_names_the_folders_a_trial_removes() -> None:
    """A template's own annotation of that key is dropped; a job that is no sweep's trial is told nothing."""
    manifest = sweep_manifest(parallelism=1)
    manifest["spec"]["template"]["spec"]["checkpoint"] = PVC
    manifest["spec"]["template"]["metadata"] = {"annotations": {REMOVE_ANNOTATION: '["sweep-9/uid-9"]', "a": "b"}}
    manifest["metadata"].update(namespace="ns", uid=SWEEP_UID)
    sweep, result = sweep_step(TrainingSweep.from_manifest(manifest), [])
    job = trial_manifest(sweep, result.create[0], result.removals)
    assert REMOVE_ANNOTATION not in job["metadata"]["annotations"] and job["metadata"]["annotations"]["a"] == "b"
    job["metadata"].update(uid="job-0", annotations={REMOVE_ANNOTATION: '["sweep-9/uid-9"]'})
    as_trial = TrainingJob.from_manifest(job)
    assert contract.REMOVE_CHECKPOINTS in environment(as_trial, Replica("worker", 0), 1)
    job["metadata"]["labels"] = {}
    not_a_trial = TrainingJob.from_manifest(job)
    assert contract.REMOVE_CHECKPOINTS not in environment(not_a_trial, Replica("worker", 0), 1)
