"""The sweep planner: trials started up to parallelism with their parameters in the status first, observed from
their jobs, stopped early, counted against the failure budget, and ranked; nothing repeated after a crash."""

from dataclasses import replace
from typing import Any

import pytest
from tests.support.builders import at, job_manifest, make_sweep, sweep_step, trial_job

from trainingjob.model import Progress
from trainingjob.model.sweep_status import SweepPhase, TrialPhase
from trainingjob.sweep.creation import CREATE_DEADLINE_SECONDS, NAME_TAKEN_ANSWER
from trainingjob.sweep.plan import after_creates
from trainingjob.sweep.trial_jobs import trial_manifest
from trainingjob.sweep.trials import PARAMETERS_ANNOTATION, SWEEP_LABEL, TRIAL_LABEL

pytestmark = pytest.mark.fast


def test_the_first_pass_records_parallelism_trials_then_creates_their_jobs() -> None:
    sweep, result = sweep_step(make_sweep(parallelism=3, maxTrials=5), [])
    assert sweep.status is not None and sweep.status.phase == SweepPhase.RUNNING
    assert [t.job_name for t in result.create] == ["sweep-0", "sweep-1", "sweep-2"]
    assert [t.number for t in sweep.status.trials] == [0, 1, 2]
    assert all(t.phase == TrialPhase.PENDING and t.start_time is None for t in sweep.status.trials)
    assert all(set(t.parameters) == {"lr", "batch"} for t in sweep.status.trials)
    assert sweep.status.counts.pending == 3 and sweep.status.start_time is not None


def test_a_pass_that_died_before_creating_creates_the_same_trials_and_no_new_ones() -> None:
    sweep, first = sweep_step(make_sweep(parallelism=2), [])
    again, second = sweep_step(sweep, [], at(5))
    assert [t.job_name for t in second.create] == [t.job_name for t in first.create]
    assert again.status == sweep.status  # nothing new drawn: the recorded parameters stand


def test_a_job_already_there_is_not_created_again_and_a_running_one_starts_its_trial() -> None:
    sweep, _ = sweep_step(make_sweep(parallelism=2), [])
    sweep, result = sweep_step(sweep, [trial_job(sweep, 0), trial_job(sweep, 1, "Pending")], at(5))
    assert not result.create
    assert sweep.status is not None
    assert [t.phase for t in sweep.status.trials] == [TrialPhase.RUNNING, TrialPhase.PENDING]
    assert all(t.start_time is not None for t in sweep.status.trials)


def test_a_trial_that_succeeds_is_ranked_and_the_next_trial_takes_its_place() -> None:
    sweep, _ = sweep_step(make_sweep(parallelism=2, maxTrials=4), [])
    jobs = [trial_job(sweep, 0, "Succeeded", curve={10: 0.5}, final=0.9), trial_job(sweep, 1, curve={10: 0.4})]
    sweep, result = sweep_step(sweep, jobs, at(5))
    assert sweep.status is not None
    done = sweep.status.trials[0]
    assert done.phase == TrialPhase.SUCCEEDED and done.objective == 0.9 and done.completion_time == at(5)
    assert sweep.status.best_trial is not None and sweep.status.best_trial.job_name == "sweep-0"
    assert [t.job_name for t in result.create] == ["sweep-2"]
    assert sweep.status.trials[1].objective == 0.4 and sweep.status.trials[1].objective_step == 10


@pytest.mark.parametrize(
    ("phase", "final", "reason"),
    [
        pytest.param("Failed", None, "JobFailed", id="job-failed"),
        pytest.param("Succeeded", None, "ObjectiveMissing", id="succeeded-without-the-metric"),
    ],
)
def test_a_trial_fails_when_its_job_fails_or_never_reports_the_objective(
    phase: str, final: float | None, reason: str
) -> None:
    sweep, _ = sweep_step(make_sweep(parallelism=1), [])
    sweep, _ = sweep_step(sweep, [trial_job(sweep, 0, phase, final=final)], at(5))
    assert sweep.status is not None and sweep.status.trials[0].phase == TrialPhase.FAILED
    assert sweep.status.trials[0].reason == reason and sweep.status.trials[0].message
    assert sweep.status.counts.failed == 1


def test_a_job_deleted_after_it_was_seen_fails_its_trial_and_is_not_run_again() -> None:
    sweep, _ = sweep_step(make_sweep(parallelism=1), [])
    sweep, _ = sweep_step(sweep, [trial_job(sweep, 0)], at(1))
    sweep, result = sweep_step(sweep, [], at(2))
    assert sweep.status is not None and sweep.status.trials[0].reason == "JobDeleted"
    assert [t.job_name for t in result.create] == ["sweep-1"]


def test_too_many_failed_trials_fail_the_sweep_and_stop_the_running_ones() -> None:
    sweep, _ = sweep_step(make_sweep(parallelism=3, maxFailedTrials=1), [])
    jobs = [trial_job(sweep, 0, "Failed"), trial_job(sweep, 1, "Failed"), trial_job(sweep, 2)]
    sweep, result = sweep_step(sweep, jobs, at(5))
    assert sweep.status is not None and sweep.status.phase == SweepPhase.FAILED
    assert sweep.status.conditions[-1].reason == "TooManyFailedTrials"
    assert sweep.status.trials[2].phase == TrialPhase.PRUNED and sweep.status.trials[2].reason == "SweepFailed"
    assert result.stop == ("sweep-2",) and not result.create
    _, after = sweep_step(sweep, [*jobs[:2], trial_job(sweep, 2, suspended=True)], at(6))
    assert not after.stop and not after.create and after.status == sweep.status


def test_the_sweep_succeeds_when_every_trial_has_finished_and_names_the_best() -> None:
    sweep, _ = sweep_step(
        make_sweep(parallelism=2, maxTrials=2, objective={"metric": "accuracy", "goal": "Minimize"}), []
    )
    jobs = [trial_job(sweep, 0, "Succeeded", final=0.3), trial_job(sweep, 1, "Succeeded", final=0.2)]
    sweep, result = sweep_step(sweep, jobs, at(9))
    assert sweep.status is not None and sweep.status.phase == SweepPhase.SUCCEEDED
    assert sweep.status.best_trial is not None and sweep.status.best_trial.number == 1  # Minimize
    assert sweep.status.completion_time == at(9) and not result.create
    assert {c.type.value: c.status.value for c in sweep.status.conditions} == {"Running": "False", "Succeeded": "True"}


def test_no_trial_succeeding_fails_the_sweep() -> None:
    sweep, _ = sweep_step(make_sweep(parallelism=1, maxTrials=1, maxFailedTrials=1), [])
    sweep, _ = sweep_step(sweep, [trial_job(sweep, 0, "Failed")], at(1))
    assert sweep.status is not None and sweep.status.phase == SweepPhase.FAILED
    assert sweep.status.conditions[-1].reason == "NoTrialSucceeded"


def test_a_suspended_sweep_starts_no_trials() -> None:
    sweep, result = sweep_step(make_sweep(suspend=True), [])
    assert not result.create and sweep.status is not None and sweep.status.phase == SweepPhase.PENDING


def test_a_namesake_job_of_another_sweep_is_never_adopted_and_its_name_waits() -> None:
    sweep, _ = sweep_step(make_sweep(parallelism=1), [])
    foreign = trial_job(sweep, 0, "Succeeded", final=0.99, owner="an-older-sweep")
    again, result = sweep_step(sweep, [foreign], at(5))
    assert not result.create and again.status is not None
    assert again.status.trials[0].phase == TrialPhase.PENDING and again.status.best_trial is None


MEDIAN = {"algorithm": "Median", "startupTrials": 2}


def test_a_trial_trailing_the_median_is_pruned_in_the_status_then_stopped() -> None:
    sweep, _ = sweep_step(make_sweep(parallelism=3, maxTrials=6, earlyStopping=MEDIAN), [])
    good = {10: 0.8, 20: 0.9}
    jobs = [
        trial_job(sweep, 0, "Succeeded", curve=good, final=0.9),
        trial_job(sweep, 1, "Succeeded", curve=good, final=0.9),
        trial_job(sweep, 2, curve={10: 0.1}),
    ]
    sweep, result = sweep_step(sweep, jobs, at(5))
    assert sweep.status is not None and sweep.status.trials[2].phase == TrialPhase.PRUNED
    assert sweep.status.trials[2].reason == "PrunedByMedian" and "near step 6" in sweep.status.trials[2].message
    assert result.stop == ("sweep-2",) and result.action.value == "Delete"  # the trial is over: its job ends
    assert [t.job_name for t in result.create] == ["sweep-3", "sweep-4"]  # the pruned one still runs: 2 places
    after_stop, after = sweep_step(sweep, jobs[:2], at(6))  # deleted, after the status recorded it
    assert not after.stop and [t.job_name for t in after.create] == ["sweep-3", "sweep-4", "sweep-5"]
    assert after_stop.status is not None
    pruned = after_stop.status.trials[2]  # the sweep's record keeps its objective and the reason
    assert (pruned.phase, pruned.reason, pruned.objective) == (TrialPhase.PRUNED, "PrunedByMedian", 0.1)


def test_a_pruned_trial_of_a_sweep_that_asks_to_suspend_is_suspended() -> None:
    stopping = {**MEDIAN, "action": "Suspend"}
    sweep, _ = sweep_step(make_sweep(parallelism=3, maxTrials=6, earlyStopping=stopping), [])
    good = {10: 0.8, 20: 0.9}
    jobs = [trial_job(sweep, n, "Succeeded", curve=good, final=0.9) for n in (0, 1)]
    sweep, result = sweep_step(sweep, [*jobs, trial_job(sweep, 2, curve={10: 0.1})], at(5))
    assert result.stop == ("sweep-2",) and result.action.value == "Suspend"
    _, after = sweep_step(sweep, [*jobs, trial_job(sweep, 2, curve={10: 0.1}, suspended=True)], at(6))
    assert not after.stop


def test_a_trial_level_with_the_others_is_not_pruned() -> None:
    sweep, _ = sweep_step(make_sweep(parallelism=3, earlyStopping=MEDIAN), [])
    good = {10: 0.8}
    jobs = [trial_job(sweep, n, "Succeeded", curve=good, final=0.9) for n in (0, 1)] + [trial_job(sweep, 2, curve=good)]
    sweep, result = sweep_step(sweep, jobs, at(5))
    assert sweep.status is not None and sweep.status.trials[2].phase == TrialPhase.RUNNING and not result.stop


def test_a_trials_job_is_the_template_with_its_parameters_labelled_and_owned() -> None:
    sweep, _ = sweep_step(make_sweep(), [])
    assert sweep.status is not None
    trial = sweep.status.trials[0]
    manifest = trial_manifest(sweep, trial)
    assert manifest["spec"]["trainer"]["learningRate"] == trial.parameters["lr"]
    assert manifest["spec"]["trainer"]["batchSize"] == trial.parameters["batch"]
    assert manifest["metadata"]["labels"] == {SWEEP_LABEL: "sweep", TRIAL_LABEL: "0"}
    assert PARAMETERS_ANNOTATION in manifest["metadata"]["annotations"]
    (owner,) = manifest["metadata"]["ownerReferences"]
    assert owner["uid"] == "sweep-uid" and owner["controller"] and owner["kind"] == "TrainingSweep"


def _steps(total: int) -> dict[str, Any]:
    """A sweep's template whose jobs run `total` steps: their curves' points are at its sixteenths."""
    return {"template": {"spec": job_manifest(trainer={"steps": total, "evalEverySteps": 10})["spec"]}}


def test_the_median_rule_judges_every_step_reported_since_the_last_reconcile() -> None:
    median = {"algorithm": "Median", "startupTrials": 1}
    sweep, _ = sweep_step(make_sweep(parallelism=2, earlyStopping=median, **_steps(160)), [])
    finished = trial_job(sweep, 0, "Succeeded", curve={10: 0.9, 20: 0.95}, final=0.95)
    behind = trial_job(sweep, 1, curve={10: 0.1, 20: 0.2, 30: 0.3})  # step 30: no finished trial reached it
    sweep, result = sweep_step(sweep, [finished, behind], at(5))
    assert sweep.status is not None and sweep.status.trials[1].phase == TrialPhase.PRUNED
    assert "0.1 near step 10" in sweep.status.trials[1].message and result.stop == ("sweep-1",)


def test_the_median_rule_compares_trials_whose_evaluations_were_seen_at_different_steps() -> None:
    # What a sweep's jobs report: each status keeps the evaluations its reconciles saw, so steps seldom coincide.
    # Every curve is taken at the sixteenths of the run (every 50 steps of 800), each the evaluation nearest to it.
    median = {"algorithm": "Median", "startupTrials": 3}
    sweep, _ = sweep_step(make_sweep(parallelism=5, earlyStopping=median, **_steps(800)), [])
    finished = [
        trial_job(sweep, 0, "Succeeded", curve={100: 0.5, 400: 0.87}, final=0.87),
        trial_job(sweep, 1, "Succeeded", curve={150: 0.11, 350: 0.12}, final=0.12),
        trial_job(sweep, 2, "Succeeded", curve={200: 0.986, 400: 0.99}, final=0.99),
    ]
    strong, weak = trial_job(sweep, 3, curve={50: 0.92, 200: 0.981}), trial_job(sweep, 4, curve={50: 0.12, 200: 0.25})
    sweep, result = sweep_step(sweep, [*finished, strong, weak], at(5))
    assert sweep.status is not None
    assert sweep.status.trials[3].phase == TrialPhase.RUNNING  # 0.92 at step 50 against the median 0.5
    assert sweep.status.trials[4].phase == TrialPhase.PRUNED and "0.12 near step 50" in sweep.status.trials[4].message
    assert result.stop == ("sweep-4",)


HALVING = {"algorithm": "SuccessiveHalving", "minSteps": 10, "reductionFactor": 2}


def test_successive_halving_judges_a_trial_against_the_rungs_of_the_others_in_a_rebuilt_study() -> None:
    # The study is rebuilt on every reconcile: the rungs the others passed must be rebuilt from their curves, or a
    # trial only ever competes with itself and is never stopped.
    sweep, _ = sweep_step(make_sweep(parallelism=4, maxTrials=6, earlyStopping=HALVING, **_steps(160)), [])
    finished = [
        trial_job(sweep, 0, "Succeeded", curve={10: 0.9, 20: 0.95, 40: 0.97}, final=0.97),
        trial_job(sweep, 1, "Succeeded", curve={10: 0.85, 20: 0.9, 40: 0.92}, final=0.92),
    ]
    weak, strong = trial_job(sweep, 2, curve={10: 0.2}), trial_job(sweep, 3, curve={10: 0.95})
    sweep, result = sweep_step(sweep, [*finished, weak, strong], at(5))
    assert sweep.status is not None
    pruned = sweep.status.trials[2]
    assert pruned.phase == TrialPhase.PRUNED and pruned.reason == "PrunedBySuccessiveHalving", pruned
    assert "0.2 near step 10" in pruned.message and result.stop == ("sweep-2",)
    assert sweep.status.trials[3].phase == TrialPhase.RUNNING  # the best at rung 0: promoted


def test_successive_halving_counts_the_rungs_a_running_trial_has_passed() -> None:
    # Trial 2 still runs, past rung 0 (step 10) with 0.9: trial 1 competes with that at rung 0, not only with the
    # one finished trial.
    sweep, _ = sweep_step(make_sweep(parallelism=4, maxTrials=6, earlyStopping=HALVING, **_steps(160)), [])
    finished = trial_job(sweep, 0, "Succeeded", curve={10: 0.5, 20: 0.6, 40: 0.7}, final=0.7)
    judged, ahead = trial_job(sweep, 1, curve={10: 0.6}), trial_job(sweep, 2, curve={10: 0.9, 20: 0.95})
    sweep, result = sweep_step(sweep, [finished, judged, ahead], at(5))
    assert sweep.status is not None
    assert sweep.status.trials[1].phase == TrialPhase.PRUNED, sweep.status.trials[1]
    assert sweep.status.trials[2].phase == TrialPhase.RUNNING and result.stop == ("sweep-1",)


def test_a_trial_at_its_last_step_is_never_pruned() -> None:
    # Trial 2 trails badly, but its job evaluated its last step (100 of 100): it is finishing, and stopping it
    # would save nothing and call a finished run pruned.
    sweep, _ = sweep_step(make_sweep(parallelism=3, maxTrials=6, earlyStopping=MEDIAN), [])
    good = {10: 0.8, 100: 0.9}
    jobs = [trial_job(sweep, n, "Succeeded", curve=good, final=0.9) for n in (0, 1)]
    finishing = trial_job(sweep, 2, curve={10: 0.1, 100: 0.1})
    sweep, result = sweep_step(sweep, [*jobs, finishing], at(5))
    assert sweep.status is not None and sweep.status.trials[2].phase == TrialPhase.RUNNING and not result.stop
    assert (sweep.status.trials[2].objective_step, sweep.status.trials[2].total_steps) == (100, 100)


def test_a_trials_objective_is_its_jobs_latest_evaluation_even_one_the_history_left_out() -> None:
    sweep, _ = sweep_step(make_sweep(parallelism=1), [])
    job = trial_job(sweep, 0, curve={10: 0.5, 20: 0.6})
    assert job.job is not None and job.job.status is not None
    report = Progress(step=25, metrics={"accuracy": 0.7}, metrics_step=25, total_steps=100)
    status = job.job.status.model_copy(update={"progress": report})
    job = replace(job, job=job.job.model_copy(update={"status": status}))
    sweep, _ = sweep_step(sweep, [job], at(5))
    assert sweep.status is not None
    trial = sweep.status.trials[0]
    assert (trial.objective, trial.objective_step, trial.step, trial.total_steps) == (0.7, 25, 25, 100)


def test_a_trial_whose_job_name_is_taken_says_so_and_fails_after_the_deadline() -> None:
    sweep, _ = sweep_step(make_sweep(parallelism=1, maxTrials=3), [])
    foreign = trial_job(sweep, 0, owner="an-older-sweep")
    sweep, result = sweep_step(sweep, [foreign], at(5))
    assert sweep.status is not None and not result.create
    waiting = sweep.status.trials[0]
    assert (waiting.phase, waiting.reason, waiting.waiting_since) == (TrialPhase.PENDING, "JobNameTaken", at(5))
    assert "sweep-0 exists and is not this sweep's" in waiting.message
    sweep, result = sweep_step(sweep, [foreign], at(5 + CREATE_DEADLINE_SECONDS))
    assert sweep.status is not None
    failed = sweep.status.trials[0]
    assert (
        failed.phase == TrialPhase.FAILED
        and failed.reason == "JobNameTaken"
        and "gave up after 600 s" in failed.message
    )
    assert [t.job_name for t in result.create] == ["sweep-1"]  # its place goes to the next trial


def test_a_trial_whose_name_is_freed_forgets_the_wait_once_its_job_exists() -> None:
    sweep, _ = sweep_step(make_sweep(parallelism=1, maxTrials=3), [])
    sweep, _ = sweep_step(sweep, [trial_job(sweep, 0, owner="an-older-sweep")], at(5))
    sweep, result = sweep_step(sweep, [], at(10))  # the namesake was deleted: the trial's job is created
    assert [t.job_name for t in result.create] == ["sweep-0"]
    sweep, _ = sweep_step(sweep, [trial_job(sweep, 0)], at(15))
    assert sweep.status is not None
    trial = sweep.status.trials[0]
    assert (trial.phase, trial.reason, trial.message, trial.waiting_since) == (TrialPhase.RUNNING, None, "", None)


def test_a_refused_trial_job_is_retried_saying_why_then_fails_after_the_deadline() -> None:
    sweep, result = sweep_step(make_sweep(parallelism=1, maxTrials=3), [])
    assert sweep.status is not None and [t.job_name for t in result.create] == ["sweep-0"]
    words = '403 Forbidden: trainingjobs "sweep-0" is forbidden: exceeded quota: jobs, used: 4, limited: 4'
    status = after_creates(sweep.status, {"sweep-0": words}, at(0))
    refused = status.trials[0]
    assert (refused.phase, refused.reason) == (
        TrialPhase.PENDING,
        "JobCreateRefused",
    ) and "exceeded quota" in refused.message
    later = after_creates(status, {"sweep-0": words}, at(CREATE_DEADLINE_SECONDS))
    assert later.trials[0].phase == TrialPhase.FAILED and later.counts.failed == 1


def test_a_trial_whose_name_a_job_without_the_sweep_label_holds_says_so_as_a_namesake() -> None:
    """A job the trials' list does not show (someone's own, unlabelled): the create's answer says the name is taken
    (before, the create's 409 was taken as done and the trial waited for ever, in silence)."""
    sweep, _ = sweep_step(make_sweep(parallelism=1, maxTrials=3), [])
    assert sweep.status is not None
    status = after_creates(sweep.status, {"sweep-0": NAME_TAKEN_ANSWER}, at(0))
    waiting = status.trials[0]
    assert (waiting.phase, waiting.reason, waiting.waiting_since) == (TrialPhase.PENDING, "JobNameTaken", at(0))
    assert "sweep-0 exists and is not this sweep's" in waiting.message
    later = after_creates(status, {"sweep-0": NAME_TAKEN_ANSWER}, at(CREATE_DEADLINE_SECONDS))
    assert (later.trials[0].phase, later.trials[0].reason) == (TrialPhase.FAILED, "JobNameTaken")
