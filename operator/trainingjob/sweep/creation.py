"""A trial whose job cannot be made: its name taken by a TrainingJob that is not the sweep's (an orphan of an earlier
sweep, someone's own), or its creation refused by the apiserver (a quota on TrainingJobs, a webhook). The trial says
why in its reason and message and stays Pending, holding its place, while each reconcile tries again; after
CREATE_DEADLINE_SECONDS it fails (and counts against maxFailedTrials), so the sweep never waits for ever in silence.
Once its job exists, the wait is forgotten."""

from collections.abc import Mapping, Sequence
from datetime import datetime

from trainingjob.model.sweep_status import MAX_TRIAL_MESSAGE, Trial, TrialPhase
from trainingjob.sweep.trials import Child, ended

NAME_TAKEN, REFUSED = "JobNameTaken", "JobCreateRefused"
NAME_TAKEN_ANSWER = "409 AlreadyExists: a TrainingJob of that name exists and is not this sweep's"
WAITING = (NAME_TAKEN, REFUSED)
CREATE_DEADLINE_SECONDS = 600.0


def _uncreated(trial: Trial) -> bool:
    return trial.phase == TrialPhase.PENDING and trial.start_time is None


def waiting(trial: Trial, reason: str, message: str, now: datetime) -> Trial:
    """The trial waits for its job to be made, saying why; failed once it has waited the deadline."""
    since = trial.waiting_since or now
    waited = (now - since).total_seconds()
    if waited >= CREATE_DEADLINE_SECONDS:
        gave_up = f"{message} (gave up after {waited:.0f} s)"[:MAX_TRIAL_MESSAGE]
        return ended(trial, TrialPhase.FAILED, reason, gave_up, now).model_copy(update={"waiting_since": since})
    return trial.model_copy(update={"reason": reason, "message": message[:MAX_TRIAL_MESSAGE], "waiting_since": since})


def judged(
    trials: Sequence[Trial], children: Mapping[str, Child], own: Mapping[str, Child], now: datetime
) -> list[Trial]:
    """The trials as their jobs' names allow: one taken by a job that is not the sweep's waits (and fails in time);
    one whose job now exists forgets an earlier wait."""
    return [_judged(t, children, own, now) for t in trials]


def _judged(trial: Trial, children: Mapping[str, Child], own: Mapping[str, Child], now: datetime) -> Trial:
    if _uncreated(trial) and trial.job_name in children and trial.job_name not in own:
        return waiting(trial, NAME_TAKEN, _taken(trial), now)
    if trial.waiting_since is not None and trial.start_time is not None and trial.reason in WAITING:
        return trial.model_copy(update={"waiting_since": None, "reason": None, "message": ""})
    return trial


def _taken(trial: Trial) -> str:
    return (
        f"TrainingJob {trial.job_name} exists and is not this sweep's (an earlier sweep's, or someone's own):"
        " delete it, or this trial fails"
    )


def refused(trials: Sequence[Trial], refusals: Mapping[str, str], now: datetime) -> list[Trial]:
    """The trials after the apiserver refused some of their jobs (job name -> its words; NAME_TAKEN_ANSWER: a job
    of that name the trials' list does not show is not the sweep's)."""
    return [_refused(t, refusals[t.job_name], now) if t.job_name in refusals and _uncreated(t) else t for t in trials]


def _refused(trial: Trial, refusal: str, now: datetime) -> Trial:
    if refusal == NAME_TAKEN_ANSWER:
        return waiting(trial, NAME_TAKEN, _taken(trial), now)
    return waiting(trial, REFUSED, f"the apiserver refused its TrainingJob: {refusal}", now)
