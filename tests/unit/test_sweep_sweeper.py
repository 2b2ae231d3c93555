"""The sweeper: once every trial has finished, the job that removes the last trials' checkpoint folders (no trial
follows them). When the sweep makes one, what it is (a job that trains nothing), and how the sweep ends on its
outcome: finished, failed, late, its name taken, or refused."""

import json
from datetime import timedelta
from typing import Any

import pytest
from tests.support.builders import SWEEP_UID, T0, at, sweep_manifest, sweep_step, trial_job

from trainingjob.children import contract
from trainingjob.children.naming import Replica
from trainingjob.children.progress_report import progress_from_report
from trainingjob.children.specs import environment
from trainingjob.model import TrainingJob
from trainingjob.model.job import MAX_NAME_LENGTH
from trainingjob.model.sweep import TrainingSweep
from trainingjob.model.sweep_status import Sweeper, SweeperPhase, SweepPhase, TrainingSweepStatus, Trial, TrialPhase
from trainingjob.sweep.checkpoints import told
from trainingjob.sweep.plan import after_creates
from trainingjob.sweep.sweeper import (
    SWEEPER_DEADLINE_SECONDS,
    SWEEPER_FOLDERS,
    sweeper_manifest,
    sweeper_name,
    sweeping,
)
from trainingjob.sweep.trials import SWEEP_LABEL, TRIAL_LABEL, Child, child

pytestmark = pytest.mark.fast

PVC = {"volume": {"persistentVolumeClaim": {"claimName": "ckpt"}}, "everySteps": 10}
GRACE = 120  # the workers' default terminationGracePeriodSeconds
LATER = T0 + timedelta(seconds=GRACE)
S, F = TrialPhase.SUCCEEDED, TrialPhase.FAILED


def _sweep(
    trials: list[Trial], state: Sweeper | None = None, checkpoint: Any = PVC, workers: Any = None
) -> TrainingSweep:
    """A sweep of these trials (the template's workers updated with `workers`; with a command, no trainer)."""
    own = {"name": "replicas", "path": "workers.replicas", "type": "Categorical", "values": [1, 2]}
    parameters = [own] if workers and "command" in workers else None
    manifest = sweep_manifest(maxTrials=len(trials), parallelism=2, parameters=parameters)
    template = manifest["spec"]["template"]["spec"]
    if checkpoint is not None:
        template["checkpoint"] = checkpoint
    template["workers"].update(workers or {})
    if "command" in template["workers"]:
        template.pop("trainer")
    manifest["metadata"].update(namespace="ns", uid=SWEEP_UID, generation=1, resourceVersion="1")
    sweep = TrainingSweep.from_manifest(manifest)
    return sweep.model_copy(update={"status": TrainingSweepStatus(trials=trials, sweeper=state)})


def _trial(number: int, phase: TrialPhase = F, objective: float | None = None, **fields: Any) -> Trial:
    values: dict[str, Any] = {"job_uid": f"uid-{number}", "completion_time": T0}
    values.update(fields)
    return Trial(number=number, job_name=f"sweep-{number}", parameters={}, phase=phase, objective=objective, **values)


def _state(folders: list[str], number: int = 1, **fields: Any) -> Sweeper:  # fields: the Sweeper's
    return Sweeper(number=number, job_name=sweeper_name("sweep", number), folders=folders, since=LATER, **fields)


def _job(sweep: TrainingSweep, state: Sweeper, phase: str | None, owner: str = SWEEP_UID) -> Child:
    manifest = sweeper_manifest(sweep, state)
    manifest["metadata"].update(uid="sweeper-uid", creationTimestamp=LATER.isoformat())
    manifest["metadata"]["ownerReferences"][0]["uid"] = owner
    return child({**manifest, "status": {"phase": phase}} if phase else manifest)


BEST_AND_TWO = [_trial(0, S, 0.9), _trial(1, S, 0.5), _trial(2)]  # 0 is the best: its folder stays
TWO = ["sweep-1/uid-1", "sweep-2/uid-2"]
SEEN: dict[str, Any] = {"start_time": LATER}
ONE_GONE = [_trial(0, S, 0.9), _trial(1, S, 0.5, checkpoint_removed=True), _trial(2)]
ALL_GONE = [BEST_AND_TWO[0], *[t.model_copy(update={"checkpoint_removed": True}) for t in BEST_AND_TWO[1:]]]


@pytest.mark.parametrize(
    ("trials", "state", "job", "now", "expected"),
    [
        pytest.param(BEST_AND_TWO, None, None, LATER, ("create", 1, TWO, ""), id="folders-left-a-sweeper-is-made"),
        pytest.param(BEST_AND_TWO, None, None, LATER - timedelta(seconds=1), ("wait", None), id="in-their-grace"),
        pytest.param(ALL_GONE, None, None, LATER, ("done", None, ""), id="nothing-left-no-sweeper"),
        pytest.param([_trial(0, S, 0.9)], None, None, LATER, ("done", None, ""), id="only-the-best-no-sweeper"),
        pytest.param(BEST_AND_TWO, _state(TWO), None, LATER, ("create", 1, TWO, ""), id="recorded-not-made-made"),
        pytest.param(BEST_AND_TWO, _state(TWO), "Running", LATER, ("wait", 1), id="running"),
        pytest.param(ALL_GONE, _state(TWO, **SEEN), "Succeeded", LATER, ("done", 1, ""), id="succeeded-ends"),
        pytest.param(
            ONE_GONE, _state(TWO, **SEEN), "Succeeded", LATER, ("done", 1, "trials 2 stay"), id="succeeded-left-some"
        ),
        pytest.param(BEST_AND_TWO, _state(TWO, **SEEN), "Failed", LATER, ("done", 1, "trials 1, 2 stay"), id="failed"),
        pytest.param(
            BEST_AND_TWO,
            _state(TWO, **SEEN),
            "Running",
            LATER + timedelta(seconds=SWEEPER_DEADLINE_SECONDS),
            ("done", 1, "did not finish in 600 s"),
            id="past-its-deadline",
        ),
        pytest.param(BEST_AND_TWO, _state(TWO, **SEEN), None, LATER, ("done", 1, "was deleted"), id="job-deleted"),
        pytest.param(BEST_AND_TWO, _state(TWO), "namesake", LATER, ("done", 1, "is not this sweep's"), id="name-taken"),
    ],
)
def test_the_sweeper_is_made_once_every_trial_has_finished_and_the_sweep_ends_on_its_outcome(
    trials: list[Trial], state: Sweeper | None, job: str | None, now: Any, expected: tuple[Any, ...]
) -> None:
    sweep = _sweep(trials, state)
    children = {}
    if job is not None and state is not None:
        found = _job(sweep, state, "Running", owner="someone") if job == "namesake" else _job(sweep, state, job)
        children[found.name] = found
    own = {n: c for n, c in children.items() if c.owner_uid == SWEEP_UID}
    result = sweeping(sweep, trials, children, own, now)
    kind, number = expected[0], expected[1]
    assert (result.state.number if result.state else None) == number
    assert result.create == (kind == "create") and result.done == (kind == "done")
    if kind == "create":
        assert result.state is not None and result.state.folders == expected[2]
    if kind == "done":
        assert expected[2] in result.note and bool(result.note) == bool(expected[2])
        finished = job is not None and job != "namesake"
        assert result.delete == ((state.job_name,) if finished and state else ())


def test_more_folders_than_one_sweeper_takes_go_to_the_next_under_the_next_name() -> None:
    trials = [_trial(n) for n in range(SWEEPER_FOLDERS + 3)]
    first = sweeping(_sweep(trials), trials, {}, {}, LATER)
    assert first.create and first.state is not None and len(first.state.folders) == SWEEPER_FOLDERS
    done = [t.model_copy(update={"checkpoint_removed": True}) for t in trials[:SWEEPER_FOLDERS]]
    trials = done + trials[SWEEPER_FOLDERS:]
    state = first.state.model_copy(update={"start_time": LATER})
    sweep = _sweep(trials, state)
    job = _job(sweep, state, "Succeeded")
    second = sweeping(sweep, trials, {job.name: job}, {job.name: job}, LATER)
    assert second.create and second.state is not None and second.state.number == 2
    assert second.state.job_name == "sweep-sweeper2" and second.delete == ("sweep-sweeper",)
    assert second.state.folders == [f"sweep-{n}/uid-{n}" for n in range(SWEEPER_FOLDERS, SWEEPER_FOLDERS + 3)]


def test_no_sweeper_without_a_shared_checkpoint_volume() -> None:
    result = sweeping(_sweep(BEST_AND_TWO, checkpoint=None), BEST_AND_TWO, {}, {}, LATER)
    assert result.done and result.state is None and not result.create


@pytest.mark.parametrize(
    ("sweep", "number", "name"),
    [
        pytest.param("sweep", 1, "sweep-sweeper", id="first"),
        pytest.param("sweep", 2, "sweep-sweeper2", id="next-never-a-trials-name"),
        pytest.param("s" * 36, 157, "s" * (MAX_NAME_LENGTH - 11) + "-sweeper157", id="long-name-cut-to-fit"),
        pytest.param("a-" * 18, 1, "a-" * 15 + "a-sweeper", id="cut-not-at-a-dash"),
    ],
)
def test_the_sweepers_name_fits_a_jobs_and_is_the_same_on_every_pass(sweep: str, number: int, name: str) -> None:
    assert sweeper_name(sweep, number) == name and len(name) <= MAX_NAME_LENGTH


def test_the_sweepers_job_trains_nothing_runs_none_of_the_users_code_and_is_told_the_folders() -> None:
    workers = {
        "replicas": 4,
        "image": "example.com/trainer:1",
        "resources": {"limits": {"nvidia.com/gpu": "8"}},
        "initContainers": [{"name": "fetch", "image": "busybox", "command": ["sh", "-c", "echo"]}],
        "nodeSelector": {"pool": "gpu"},
    }
    sweep = _sweep(BEST_AND_TWO, workers=workers)
    manifest = sweeper_manifest(sweep, _state(TWO))
    job = TrainingJob.from_manifest({**manifest, "metadata": {**manifest["metadata"], "uid": "sweeper-uid"}})
    role = job.spec.workers
    assert role.replicas == 1 and role.command == ["python", "-m", "trainer", contract.SWEEPER_FLAG, "sweep"]
    assert job.spec.trainer is None and not role.init_containers and role.image == "example.com/trainer:1"
    assert role.node_selector == {"pool": "gpu"} and role.resources is not None
    assert "nvidia.com/gpu" not in (role.resources.model_dump(by_alias=True, exclude_none=True).get("limits") or {})
    assert job.spec.checkpoint == sweep.spec.template.spec.checkpoint
    labels, owner = manifest["metadata"]["labels"], manifest["metadata"]["ownerReferences"][0]
    assert labels == {SWEEP_LABEL: "sweep"} and TRIAL_LABEL not in labels and owner["uid"] == SWEEP_UID
    assert told(manifest["metadata"]["annotations"]) == TWO
    env = environment(job, Replica("worker", 0), 1)
    assert contract.TRAINER_CONFIG not in env and json.loads(env[contract.REMOVE_CHECKPOINTS]) == TWO


def test_a_template_running_its_own_command_gets_the_operators_trainer_image() -> None:
    workers = {"image": "example.com/mine:1", "command": ["python", "train.py"], "args": ["--fast"]}
    role = sweeper_manifest(_sweep(BEST_AND_TWO, workers=workers), _state(TWO))["spec"]["workers"]
    assert "image" not in role and "args" not in role
    assert role["command"] == ["python", "-m", "trainer", contract.SWEEPER_FLAG, "sweep"]


def _finished_sweep(**spec: Any) -> TrainingSweep:
    """A sweep of two trials, both finished (0 succeeded best, 1 failed) GRACE ago."""
    manifest = sweep_manifest(parallelism=2, maxTrials=2, **spec)
    manifest["spec"]["template"]["spec"]["checkpoint"] = PVC
    manifest["metadata"].update(namespace="ns", uid=SWEEP_UID, generation=1, resourceVersion="1")
    sweep, _ = sweep_step(TrainingSweep.from_manifest(manifest), [])
    jobs = [trial_job(sweep, 0, "Succeeded", final=0.9), trial_job(sweep, 1, "Failed")]
    sweep, _ = sweep_step(sweep, jobs, at(1))
    return sweep


def test_the_sweep_ends_only_once_its_sweeper_has_and_the_sweeper_is_never_a_trial() -> None:
    sweep = _finished_sweep()
    waiting = sweep.status
    assert waiting is not None and waiting.phase == SweepPhase.RUNNING and waiting.sweeper is None  # in the grace
    assert "after their grace" in waiting.conditions[-1].message, waiting.conditions
    jobs = [trial_job(sweep, 0, "Succeeded", final=0.9), trial_job(sweep, 1, "Failed")]
    sweep, result = sweep_step(sweep, jobs, at(1 + GRACE))
    status = sweep.status
    assert status is not None and status.phase == SweepPhase.RUNNING and result.sweep and not result.create
    assert status.conditions[-1].reason == "RemovingCheckpoints", status.conditions
    assert status.sweeper is not None and status.sweeper.folders == ["sweep-1/job-1"]
    assert len(status.trials) == 2 and status.counts.started == 2  # not a trial
    state = status.sweeper
    job = _job(sweep, state, "Succeeded")
    assert job.job is not None and job.job.status is not None
    progress = progress_from_report({"step": 0, "checkpointsCleared": ["sweep-1/job-1"]})[0]
    reported = job.job.model_copy(update={"status": job.job.status.model_copy(update={"progress": progress})})
    job = Child(job.name, job.owner_uid, reported, job.created, False, job.uid)
    sweep, result = sweep_step(sweep, [*jobs, job], at(2 + GRACE))
    status = sweep.status
    assert status is not None and status.phase == SweepPhase.SUCCEEDED, status
    assert status.sweeper is not None and status.sweeper.phase == SweeperPhase.SUCCEEDED
    assert status.checkpoints_removed == 1 and status.trials[1].checkpoint_removed
    assert result.delete == (state.job_name,) and status.counts.started == 2


def test_a_refused_sweeper_ends_the_sweep_saying_the_folders_stay() -> None:
    sweep = _finished_sweep()
    jobs = [trial_job(sweep, 0, "Succeeded", final=0.9), trial_job(sweep, 1, "Failed")]
    sweep, result = sweep_step(sweep, jobs, at(1 + GRACE))
    assert result.status.sweeper is not None
    after = after_creates(result.status, {result.status.sweeper.job_name: "403 Forbidden: quota"}, at(1 + GRACE))
    sweep = sweep.model_copy(update={"status": after})
    sweep, _ = sweep_step(sweep, jobs, at(2 + GRACE))
    status = sweep.status
    assert status is not None and status.phase == SweepPhase.SUCCEEDED
    assert "trials 1 stay" in status.conditions[-1].message and "quota" in status.conditions[-1].message
