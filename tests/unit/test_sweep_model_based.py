"""Model-based test of sweeps: the real sweep reconcile against an in-memory apiserver (tests/support/fake_sweeps.py),
reading through the operator's watch-fed stores as production does (sweeps and trials lag the cluster, kind by
kind, or are listed again), driven by random sequences of trial jobs running, evaluating (often enough that their
histories thin), succeeding with or without the objective, failing and deleted; users editing the sweep's spec
(a template TTL is refused), namesakes of trial jobs (a user's own, an earlier sweep's), creations refused (a
quota), time passing; and the operator killed after any write. Checked after every step: no trial lost, repeated or
changed; parallelism and the budget never exceeded; a finished trial or sweep never changes; a Succeeded trial's
objective is its job's result; bestTrial is the best; a trial at its last step is never pruned; a namesake is
never touched; a new trial is told to remove only finished trials' checkpoint folders, never the best's or a
namesake's, and a trial said checkpointRemoved has none; a sweeper (the job that removes the last trials' folders)
is never a trial, never runs beside another, and the sweep never ends while it runs. Over time: once the cluster
is quiet, every trial's job is made or the trial fails; once every job has run to its end (a sweeper's, or not:
it hangs) and time has passed, the sweep has ended.

Set TJ_MODEL_SEED to replay a run and TJ_MODEL_EXAMPLES to explore more (or fewer) sequences."""

from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from tests.support.builders import T0, job_manifest, sweep_manifest
from tests.support.fake_sweeps import Crash, FakeSweepCluster
from tests.support.fake_watch import FakeWatch
from tests.support.model_runs import knob, run_model
from tests.support.sweep_checks import SweepLedger

from trainingjob.kube.ports import Conflict
from trainingjob.model.sweep import TrainingSweep
from trainingjob.reconcile.sweep import reconcile_sweep
from trainingjob.runtime.cached import CachedSweepCluster
from trainingjob.sweep.creation import CREATE_DEADLINE_SECONDS
from trainingjob.sweep.sweeper import SWEEPER_DEADLINE_SECONDS
from trainingjob.sweep.trials import SWEEP_LABEL, TRIAL_LABEL, controller_of

pytestmark = pytest.mark.model

NS, NAME, UID = "ns", "sweep", "sweep-uid"
KEY = (NS, NAME)
KINDS = ("sweeps", "trials")
TOTAL, EVERY = 1000, 5  # each trial trains TOTAL steps, evaluating every EVERY: 200 evaluations, its history thins
SEED, EXAMPLES, STEPS = knob("SEED", 20261127), knob("EXAMPLES", 200), knob("STEPS", 60)
TOTALS: Counter[str] = Counter()
Manifest = dict[str, Any]


@st.composite
def sweep_specs(draw: st.DrawFn) -> Manifest:
    algorithm = draw(st.sampled_from(["Random", "TPE", "Grid"]))
    parameters: list[Manifest] = [
        {"name": "batch", "path": "trainer.batchSize", "type": "Categorical", "values": [16, 32, 64]}
    ]
    if algorithm != "Grid":
        parameters.append(
            {"name": "lr", "path": "trainer.learningRate", "type": "Float", "min": 0.001, "max": 1.0, "log": True}
        )
    spec: Manifest = {
        "template": {"spec": job_manifest(trainer={"steps": TOTAL, "evalEverySteps": EVERY})["spec"]},
        "parameters": parameters,
        "search": {"algorithm": algorithm, "startupTrials": draw(st.integers(0, 2))},
        "objective": {"metric": "accuracy", "goal": draw(st.sampled_from(["Maximize", "Minimize"]))},
        "maxTrials": draw(st.integers(1, 8)),
        "parallelism": draw(st.integers(1, 3)),
        "maxFailedTrials": draw(st.integers(0, 6)),
    }
    stopping = draw(st.sampled_from([None, "Median", "Median", "SuccessiveHalving"]))
    if stopping:
        spec["earlyStopping"] = {
            "algorithm": stopping,
            "startupTrials": 1,
            "minSteps": 100,
            "reductionFactor": 2,
            "action": draw(st.sampled_from(["Suspend", "Delete"])),
        }
    if (spec["maxTrials"] + spec["parallelism"]) % 2:  # a shared checkpoint volume: finished trials' folders go
        volume = {"persistentVolumeClaim": {"claimName": "checkpoints"}}  # (no draw of its own: the sequences
        spec["template"]["spec"]["checkpoint"] = {"volume": volume, "everySteps": 100}  # explored stay as they were)
        spec["template"]["spec"]["workers"]["terminationGracePeriodSeconds"] = 0  # named as soon as they finish
        spec["keepBestCheckpoints"] = spec["maxFailedTrials"] % 3
    return spec


EDITS = {
    "maxTrials+2": lambda s: s.update(maxTrials=s["maxTrials"] + 2),
    "maxTrials-1": lambda s: s.update(maxTrials=max(1, s["maxTrials"] - 1)),
    "parallelism+1": lambda s: s.update(parallelism=s["parallelism"] + 1),
    "parallelism=1": lambda s: s.update(parallelism=1),
    "suspend": lambda s: s.update(suspend=not s.get("suspend", False)),
    "maxFailedTrials+1": lambda s: s.update(maxFailedTrials=s["maxFailedTrials"] + 1),
    "template TTL": lambda s: s["template"]["spec"].setdefault("runPolicy", {}).update(ttlSecondsAfterFinished=60),
}


class SweepUnderEvents(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = T0
        self.cluster = FakeSweepCluster(clock=lambda: self.now)
        self.ledger = SweepLedger(TOTALS)
        self.thinned: set[str] = set()  # the jobs whose evaluation history the job operator has thinned

    def start_operator(self) -> None:
        """A new operator process: its stores start from a fresh list of sweeps and trials."""
        self.watch = FakeWatch(self.cluster, kinds=KINDS)
        self.cached = CachedSweepCluster(self.cluster, self.watch.stores)

    @property
    def sweep(self) -> Manifest:
        return self.cluster.sweeps[KEY]

    @initialize(spec=sweep_specs())
    def submit(self, spec: Manifest) -> None:
        manifest = sweep_manifest(NAME, **spec)
        manifest["metadata"].update(namespace=NS, uid=UID)
        self.cluster.submit_sweep(manifest)
        self.ledger.spec_now(TrainingSweep.from_manifest(manifest).spec)
        self.start_operator()

    # -- the operator --------------------------------------------------------------------------------------

    @rule(crash_after=st.none() | st.integers(0, 4), caught_up=st.booleans())
    def reconcile(self, crash_after: int | None, caught_up: bool) -> None:
        """One reconcile through the stores, caught up with the cluster or lagging it."""
        if caught_up:
            self.watch.deliver_all()
        self.watch.record()
        self.cluster.writes_left = crash_after
        try:
            reconcile_sweep(self.cached, NS, NAME, now=self.now)
            TOTALS["reconciles"] += 1
        except Crash:
            TOTALS["crashes"] += 1
            self.start_operator()
        except Conflict:
            TOTALS["conflicts (a stale sweep)"] += 1
        finally:
            self.cluster.writes_left = None

    @rule(kind=st.sampled_from(KINDS), count=st.none() | st.integers(1, 3))
    def watch_delivers(self, kind: str, count: int | None) -> None:
        self.watch.deliver(kind, count)

    @rule(kind=st.sampled_from(KINDS))
    def watch_expires(self, kind: str) -> None:
        self.watch.relist(kind)

    # -- trial jobs ----------------------------------------------------------------------------------------

    def _job(self, data: st.DataObject) -> Manifest | None:
        active = [
            j
            for j in self.cluster.trials.values()
            if j["status"]["phase"] in ("Pending", "Running") and j["metadata"]["uid"] in self.cluster_made
        ]
        return data.draw(st.sampled_from(active)) if active else None

    @property
    def cluster_made(self) -> set[str]:
        return {f"{name}-{n}" for name, count in self.cluster.created.items() for n in range(1, count + 1)}

    @rule(data=st.data())
    def job_runs(self, data: st.DataObject) -> None:
        job = self._job(data)
        if job is not None and not job["spec"].get("runPolicy", {}).get("suspend"):
            job["status"]["phase"] = "Running"
            self.cluster.start_trainer(job)

    @rule(data=st.data(), count=st.integers(1, 100), quality=st.floats(0.05, 0.95))
    def job_evaluates(self, data: st.DataObject, count: int, quality: float) -> None:
        """Rank 0 evaluates `count` times before the job's reconcile reads it."""
        job = self._job(data)
        if job is not None and not job["spec"].get("runPolicy", {}).get("suspend"):
            self._evaluated(job, count, quality)

    def _evaluated(self, job: Manifest, count: int, quality: float) -> None:
        """Its curve rises towards the first `quality` drawn for the job."""
        level = self.ledger.qualities.setdefault(job["metadata"]["uid"], quality)
        done = (job["status"].get("progress") or {}).get("step", 0)
        for step in range(done + EVERY, min(TOTAL, done + EVERY * count) + 1, EVERY):
            self.cluster.evaluate(job, step, "accuracy", level * (step / TOTAL) ** 0.5, TOTAL)
            TOTALS["evaluations"] += 1
        thinned = job["status"].get("history", {}).get("evaluationEverySteps", 1) > EVERY
        if thinned and job["metadata"]["uid"] not in self.thinned:
            self.thinned.add(job["metadata"]["uid"])
            TOTALS["trial histories thinned"] += 1

    @rule(count=st.integers(1, 60), qualities=st.lists(st.floats(0.05, 0.95), min_size=3, max_size=3))
    def training_goes_on(self, count: int, qualities: list[float]) -> None:
        """Every trial job that runs evaluates `count` times, then the sweep is reconciled (as a trial job's status
        change wakes it)."""
        active = [j for j in self.cluster.trials.values() if j["metadata"]["uid"] in self.cluster_made]
        for index, job in enumerate(active):
            if job["status"]["phase"] in ("Pending", "Running") and not job["spec"].get("runPolicy", {}).get("suspend"):
                self._evaluated(job, count, qualities[index % len(qualities)])
        self.reconcile(None, caught_up=True)

    @rule(data=st.data(), fails=st.booleans(), quality=st.floats(0.05, 0.95), final=st.none() | st.floats(0.0, 1.0))
    def job_ends(self, data: st.DataObject, fails: bool, quality: float, final: float | None) -> None:
        """The job fails where it is, or trains and evaluates to its last step and succeeds, its result's objective
        `final` (None: it reports none)."""
        job = self._job(data)
        if job is None or job["spec"].get("runPolicy", {}).get("suspend"):
            return
        status = job["status"]
        if fails:
            status["phase"] = "Failed"
            return
        self._succeeds(job, quality, final)

    def _succeeds(self, job: Manifest, quality: float, final: float | None) -> None:
        self._evaluated(job, TOTAL // EVERY, quality)
        job["status"]["phase"] = "Succeeded"
        job["status"]["result"] = {"metrics": {} if final is None else {"accuracy": final}, "metricsStep": TOTAL}
        self.ledger.results[job["metadata"]["name"]] = final

    def everything_ends(self, quality: float, final: float, sweeper_hangs: bool) -> None:
        """Every job runs to its end (the sweeper's too, unless it hangs) and time passes, pass after pass: the
        sweep ends, once its sweeper (if it makes one) has finished or run out its time. (At the end of each
        sequence: as a rule it would end most sweeps before early stopping had its chance.)"""
        self.cluster.refusal = None
        if self.sweep["spec"].get("suspend"):
            self.cluster.edit_sweep(KEY, EDITS["suspend"])
        for _ in range(4 * self.ledger.budget + 8):
            if (self.sweep.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                break
            for job in [j for j in self.cluster.trials.values() if j["metadata"]["uid"] in self.cluster_made]:
                sweeper = TRIAL_LABEL not in job["metadata"]["labels"]
                if job["status"]["phase"] not in ("Pending", "Running") or job["spec"].get("runPolicy", {}).get(
                    "suspend"
                ):
                    continue
                if sweeper:
                    TOTALS["sweepers made"] += 1
                if sweeper and not sweeper_hangs:
                    gone = len(self.cluster.volume)
                    self.cluster.start_trainer(job)  # it removes its folders and reports them gone, as a trial does
                    TOTALS["folders a sweeper removed"] += gone - len(self.cluster.volume)
                if not (sweeper and sweeper_hangs):
                    self._succeeds(job, quality, final)
            self.reconcile(None, caught_up=True)
            self.sweep_holds()
            self.now += timedelta(seconds=max(CREATE_DEADLINE_SECONDS, SWEEPER_DEADLINE_SECONDS) + 1)
        self.ledger.sweep_ended(self.sweep)
        TOTALS["sweeps run to their end"] += 1

    # -- users and the cluster -----------------------------------------------------------------------------

    @rule(data=st.data())
    def user_deletes_a_job(self, data: st.DataObject) -> None:
        """A user (or a TTL the user set on the job) deletes any TrainingJob: a trial's or a namesake."""
        keys = sorted(self.cluster.jobs)
        if keys:
            key = data.draw(st.sampled_from(keys))
            self.ledger.deleted(self.cluster.jobs.pop(key), self.cluster.created)

    @rule(trouble=st.sampled_from(["a user's namesake", "an earlier sweep's namesake", "quota", "no quota"]))
    def trouble(self, trouble: str) -> None:
        """A TrainingJob takes the name of the next trial (someone's own, or one an earlier sweep left), or the
        apiserver starts or stops refusing TrainingJobs (a quota, a webhook)."""
        if trouble.endswith("namesake"):
            number = len((self.sweep.get("status") or {}).get("trials") or [])
            labels = {SWEEP_LABEL: NAME} if trouble.startswith("an earlier") else {}
            self.cluster.add_namesake(NS, f"{NAME}-{number}", labels)
        else:
            self.cluster.refusal = "403 Forbidden: exceeded quota: trainingjobs" if trouble == "quota" else None
        TOTALS[trouble] += 1

    @rule(edit=st.sampled_from(sorted(EDITS)))
    def user_edits_the_sweep(self, edit: str) -> None:
        stored = self.cluster.edit_sweep(KEY, EDITS[edit])
        assert stored != (edit == "template TTL"), f"the edit {edit!r} was {'taken' if stored else 'refused'}"
        if stored:
            self.ledger.spec_now(TrainingSweep.from_manifest(self.sweep).spec)
        TOTALS[f"edits {'taken' if stored else 'refused'}"] += 1

    @rule(seconds=st.sampled_from([1, 30, 300]))
    def clock(self, seconds: int) -> None:
        self.now += timedelta(seconds=seconds)

    def _waiting(self) -> bool:
        """Some trial has no job of its own yet."""
        trials = (self.sweep.get("status") or {}).get("trials") or []
        own = {j["metadata"]["name"] for j in self.cluster.trials.values() if controller_of(j) == UID}
        return any(t["phase"] in ("Pending", "Running") and t["jobName"] not in own for t in trials)

    @precondition(lambda self: hasattr(self, "watch") and self._waiting())
    @rule()
    def cluster_goes_quiet(self) -> None:
        """No refusals, the stores caught up and the create deadline past: every trial has its own job, or failed."""
        self.cluster.refusal = None
        for _ in range(2):
            self.reconcile(None, caught_up=True)  # a trial is recorded in one pass, its name judged in the next
            self.now += timedelta(seconds=CREATE_DEADLINE_SECONDS + 1)
        self.reconcile(None, caught_up=True)
        self.reconcile(None, caught_up=True)
        self.ledger.settled(self.sweep, self.cluster.jobs, self.now)
        TOTALS["quiet spells"] += 1

    @invariant()
    def sweep_holds(self) -> None:
        if hasattr(self, "watch"):
            self.ledger.check(self.sweep, self.cluster)

    def teardown(self) -> None:
        TOTALS["sequences"] += 1
        if hasattr(self, "watch"):  # a sequence's own draws decide: whether its sweeper hangs, the results
            made = sum(self.cluster.created.values())
            self.everything_ends(0.3 + 0.1 * (made % 5), 0.1 * (made % 10), sweeper_hangs=made % 3 == 0)


def test_sweeps_hold_their_invariants_under_random_events() -> None:
    run_model(SweepUnderEvents, seed_value=SEED, examples=EXAMPLES, steps=STEPS, totals=TOTALS)
    assert TOTALS["trials pruned by a rule"] > 0, "no trial was ever pruned: the test no longer reaches pruning"
    assert TOTALS["most checkpoint folders removed in a sweep"] > 0, "no trial's checkpoint folder was ever removed"
    assert TOTALS["sweepers made"] > 0, "no sweep ever made a sweeper: the test no longer reaches a sweep's end"
