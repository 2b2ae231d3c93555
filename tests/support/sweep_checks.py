"""What a sweep must hold whatever happened (the sweep model-based test's invariants), and what it has reached once
the cluster is quiet. The ledger remembers what the run did: the trials as first recorded, the results the jobs
reported, the specs the user set."""

import copy
import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tests.support.fake_sweeps import FakeSweepCluster

from trainingjob.model.sweep import Goal, TrainingSweepSpec
from trainingjob.model.sweep_status import SweeperPhase, TrainingSweepStatus, Trial, TrialPhase
from trainingjob.sweep.checkpoints import folder, kept_best
from trainingjob.sweep.creation import CREATE_DEADLINE_SECONDS, WAITING
from trainingjob.sweep.pruning import REASONS
from trainingjob.sweep.sampling import trial_budget
from trainingjob.sweep.trials import PARAMETERS_ANNOTATION, TRIAL_LABEL, controller_of

Manifest = dict[str, Any]
PRUNED_BY_A_RULE = frozenset(REASONS.values())


@dataclass
class SweepLedger:
    totals: Counter[str]
    budget: int = 0  # the largest trial budget and parallelism any spec of the run set
    parallelism: int = 0
    goal: Goal = Goal.MAXIMIZE
    recorded: dict[int, Any] = field(default_factory=dict)  # trial number -> parameters, as first recorded
    finished: dict[int, str] = field(default_factory=dict)  # trial number -> phase, once finished
    terminal: Manifest | None = None  # the sweep's status once Succeeded or Failed
    seen_started: set[str] = field(default_factory=set)  # jobs whose trial the status has recorded as started
    never_again: dict[str, int] = field(default_factory=dict)  # jobs deleted after their trial started: made then
    qualities: dict[str, float] = field(default_factory=dict)  # job UID -> where its curve rises to
    results: dict[str, float | None] = field(default_factory=dict)  # job name -> its last success's objective
    keep: int = 1  # keepBestCheckpoints
    told_checked: int = 0  # the cluster's creations whose named checkpoint folders were checked

    def spec_now(self, spec: TrainingSweepSpec) -> None:
        self.budget = max(self.budget, trial_budget(spec))
        self.parallelism = max(self.parallelism, spec.parallelism)
        self.goal = spec.objective.goal
        self.keep = spec.keep_best_checkpoints

    def deleted(self, job: Manifest, created: Counter[str]) -> None:
        name = job["metadata"]["name"]
        if name in self.seen_started:
            self.never_again[name] = created[name]
        self.totals["jobs deleted by a user"] += 1

    def check(self, sweep: Manifest, cluster: FakeSweepCluster) -> None:
        status = TrainingSweepStatus.model_validate(sweep.get("status") or {}, by_alias=True)
        assert [t.number for t in status.trials] == list(range(len(status.trials)))
        assert status.counts.started == len(status.trials) + (status.summarised.total if status.summarised else 0)
        assert len(status.trials) <= self.budget, "more trials than any budget the spec set"
        for trial in status.trials:
            self._trial(trial)
        self._objectives(status)
        self._jobs(cluster)
        self._checkpoints(status, cluster)
        if self.terminal is not None:
            assert sweep["status"] == self.terminal, "a finished sweep changed"
        elif status.phase.is_terminal:
            self.terminal = copy.deepcopy(sweep["status"])
            self.totals[f"sweeps {status.phase.value}"] += 1
            if status.sweeper is not None:
                self.totals[f"sweeps ended after a sweeper {status.sweeper.phase.value}"] += 1
            assert status.sweeper is None or status.sweeper.phase != SweeperPhase.RUNNING, "ended while it sweeps"

    def _trial(self, trial: Trial) -> None:
        assert self.recorded.setdefault(trial.number, trial.parameters) == trial.parameters, "a trial changed"
        if trial.number in self.finished:
            assert trial.phase.value == self.finished[trial.number], "a finished trial changed"
        elif trial.phase.is_finished:
            self.finished[trial.number] = trial.phase.value
            self.totals[f"trials {trial.phase.value} ({trial.reason or 'ok'})"] += 1
            if trial.phase == TrialPhase.PRUNED and trial.reason in PRUNED_BY_A_RULE:
                reached = max(trial.step or 0, trial.objective_step or 0)
                assert trial.total_steps is None or reached < trial.total_steps, "a trial at its end was pruned"
                self.totals["trials pruned by a rule"] += 1
        if trial.start_time is not None:
            self.seen_started.add(trial.job_name)

    def _objectives(self, status: TrainingSweepStatus) -> None:
        """A Succeeded trial's objective is what its job reported as its result; bestTrial is the best of them."""
        succeeded = [t for t in status.trials if t.phase == TrialPhase.SUCCEEDED]
        for trial in succeeded:
            assert trial.objective == self.results[trial.job_name], f"trial {trial.number}'s objective is not its job's"
        sign = -1.0 if self.goal == Goal.MAXIMIZE else 1.0
        ranked = sorted(succeeded, key=lambda t: (sign * float(t.objective or 0.0), t.number))
        best = status.best_trial
        assert (best.number if best else None) == (ranked[0].number if ranked else None), "bestTrial is not the best"
        if best is not None:
            assert best.objective == ranked[0].objective and best.parameters == ranked[0].parameters

    def _jobs(self, cluster: FakeSweepCluster) -> None:
        made = {f"{name}-{n}" for name, count in cluster.created.items() for n in range(1, count + 1)}
        for what, name, uid in cluster.acted:
            assert uid in made or uid == "", f"the sweep's {what} reached {name}, a job not its own ({uid})"
        sweepers = [j for j in cluster.jobs.values() if j["metadata"]["uid"] in made and _sweeper(j)]
        active = [j["metadata"]["name"] for j in sweepers if j["status"]["phase"] in ("Pending", "Running")]
        assert len(active) <= 1, f"two sweepers at once: {active}"
        for job in cluster.jobs.values():  # every other job it made is a recorded trial, with its parameters
            if job["metadata"]["uid"] in made and not _sweeper(job):
                number = int(job["metadata"]["labels"][TRIAL_LABEL])
                assert json.loads(job["metadata"]["annotations"][PARAMETERS_ANNOTATION]) == self.recorded[number]
        for name, count in self.never_again.items():  # its trial failed (JobDeleted): the job is not run again
            assert cluster.created[name] == count, f"{name} was created again after its trial had started"
        running = [
            j
            for j in cluster.jobs.values()
            if j["metadata"]["uid"] in made
            and not _sweeper(j)
            and j["status"]["phase"] in ("Pending", "Running")
            and not j["spec"].get("runPolicy", {}).get("suspend")
        ]
        assert len(running) <= self.parallelism, "more trials running than parallelism"

    def _checkpoints(self, status: TrainingSweepStatus, cluster: FakeSweepCluster) -> None:
        """A folder a new trial was told to remove was a finished trial's (of its job's UID, not a namesake's),
        not among the keepBestCheckpoints best then; the best's and the namesakes' folders stay; a trial said
        checkpointRemoved has none; checkpointsRemoved counts them."""
        for named, then in cluster.told[self.told_checked :]:
            before = TrainingSweepStatus.model_validate(then, by_alias=True)
            kept = kept_best(before.trials, self.goal, self.keep)
            by_folder = {folder(t): t for t in before.trials if t.job_uid}
            for name in named:
                trial = by_folder.get(name)
                assert trial is not None and trial.phase.is_finished, f"{name} is not a finished trial's folder"
                assert trial.number not in kept, f"{name}: one of the best trials' folders was named"
                self.totals["checkpoint folders named"] += 1
        self.told_checked = len(cluster.told)
        for number in kept_best(status.trials, self.goal, self.keep):
            trial = status.trials[number]
            assert not trial.job_uid or folder(trial) in cluster.volume, f"the best trial {number}'s folder went"
        namesakes = {f"{j['metadata']['name']}/{j['metadata']['uid']}" for j in cluster.jobs.values()}
        namesakes = {f for f in namesakes if f.split("/")[1].startswith("namesake-")}
        assert namesakes <= cluster.volume, "a namesake's checkpoint folder went"
        removed = [t for t in status.trials if t.checkpoint_removed]
        assert all(folder(t) not in cluster.volume for t in removed), "a trial said removed still has its folder"
        assert status.checkpoints_removed == len(removed) + (
            status.summarised.checkpoints_removed if status.summarised else 0
        )
        self.totals["most checkpoint folders removed in a sweep"] = max(
            self.totals["most checkpoint folders removed in a sweep"], len(removed)
        )

    def sweep_ended(self, sweep: Manifest) -> None:
        """Once every trial has finished and the sweeper's deadline has passed, the sweep has ended."""
        status = TrainingSweepStatus.model_validate(sweep.get("status") or {}, by_alias=True)
        assert status.phase.is_terminal, f"the sweep has not ended: {status.conditions}"

    def settled(self, sweep: Manifest, jobs: Mapping[tuple[str, str], Manifest], now: datetime) -> None:
        """Once the cluster is quiet: every trial not finished has a job of its own, or says why it waits for one
        (and has waited less than the deadline): none waits for ever, or in silence."""
        status = TrainingSweepStatus.model_validate(sweep.get("status") or {}, by_alias=True)
        uid = sweep["metadata"]["uid"]
        namespace = sweep["metadata"]["namespace"]
        for trial in status.trials:
            if trial.phase.is_finished:
                continue
            job = jobs.get((namespace, trial.job_name))
            if job is not None and controller_of(job) == uid:
                continue
            waited = (now - trial.waiting_since).total_seconds() if trial.waiting_since else None
            assert trial.reason in WAITING and waited is not None and waited < CREATE_DEADLINE_SECONDS, (
                f"trial {trial.number} ({trial.phase.value}, {trial.reason}, {waited} s) waits without its job"
            )


def _sweeper(job: Manifest) -> bool:
    """A sweep's sweeper: its job, not a trial's (no trial label)."""
    return TRIAL_LABEL not in (job["metadata"].get("labels") or {})
