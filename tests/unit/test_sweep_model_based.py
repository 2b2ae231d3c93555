"""Model-based test of sweeps: the real sweep reconcile against an in-memory cluster, driven by random sequences of
trial jobs running, reporting evaluations, succeeding (with or without the objective), failing and being deleted,
and by the operator killed after any write, with invariants checked after every step: no trial lost, repeated or
changed; parallelism and the trial budget never exceeded; a finished trial or sweep never changes.

Set TJ_MODEL_SEED to replay a run and TJ_MODEL_EXAMPLES to explore more (or fewer) sequences."""

import copy
import json
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from tests.support.builders import T0, sweep_manifest
from tests.support.model_runs import knob, run_model

from trainingjob.kube.ports import Conflict
from trainingjob.local.cluster import merge_patched
from trainingjob.model.sweep import TrainingSweep
from trainingjob.model.sweep_status import TrainingSweepStatus
from trainingjob.reconcile.sweep import reconcile_sweep
from trainingjob.sweep.sampling import trial_budget
from trainingjob.sweep.trials import PARAMETERS_ANNOTATION, TRIAL_LABEL

pytestmark = pytest.mark.model

NS, NAME, UID = "ns", "sweep", "sweep-uid"
SEED, EXAMPLES, STEPS = knob("SEED", 20261123), knob("EXAMPLES", 300), knob("STEPS", 50)
TOTALS: Counter[str] = Counter()
Manifest = dict[str, Any]


class Crash(Exception):  # noqa: N818  (the operator killed mid-reconcile)
    pass


class FakeSweepCluster:
    """The sweep and its trial jobs; every write counts, and the one after `crash_after` raises Crash."""

    def __init__(self, sweep: Manifest) -> None:
        self.sweep = sweep
        self.jobs: dict[str, Manifest] = {}
        self.writes_left: int | None = None
        self.created: Counter[str] = Counter()

    def _write(self) -> None:
        if self.writes_left is not None:
            if self.writes_left == 0:
                raise Crash
            self.writes_left -= 1

    def read_sweep(self, namespace: str, name: str) -> Manifest | None:
        return copy.deepcopy(self.sweep)

    def list_trial_jobs(self, namespace: str, sweep: str) -> list[Manifest]:
        return copy.deepcopy(list(self.jobs.values()))

    def write_sweep_status(self, namespace: str, name: str, resource_version: str, patch: Manifest) -> str:
        if resource_version != self.sweep["metadata"]["resourceVersion"]:
            raise Conflict(name)
        self._write()
        merged = merge_patched(self.sweep.get("status") or {}, patch)
        status = TrainingSweepStatus.model_validate(merged, by_alias=True)  # what the CRD's schema would store
        self.sweep["status"] = status.model_dump(mode="json", by_alias=True, exclude_none=True)
        version = str(int(resource_version) + 1)
        self.sweep["metadata"]["resourceVersion"] = version
        return version

    def create_job(self, namespace: str, manifest: Manifest) -> str | None:
        self._write()
        name = manifest["metadata"]["name"]
        if name not in self.jobs:
            self.created[name] += 1
            job = copy.deepcopy(manifest)
            job["metadata"].update(creationTimestamp=T0.isoformat(), uid=f"{name}-{self.created[name]}")
            job["status"] = {"phase": "Pending"}
            self.jobs[name] = job
        return None

    def suspend_job(self, namespace: str, name: str) -> None:
        self._write()
        if name in self.jobs:
            self.jobs[name]["spec"].setdefault("runPolicy", {})["suspend"] = True

    def delete_job(self, namespace: str, name: str, uid: str) -> None:
        self._write()
        if self.jobs.get(name, {}).get("metadata", {}).get("uid") == uid:  # else 409: a precondition failed
            self.jobs.pop(name)


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
        "parameters": parameters,
        "search": {"algorithm": algorithm, "startupTrials": draw(st.integers(0, 2))},
        "maxTrials": draw(st.integers(1, 6)),
        "parallelism": draw(st.integers(1, 3)),
        "maxFailedTrials": draw(st.integers(0, 6)),
    }
    stopping = draw(st.sampled_from([None, "Median", "SuccessiveHalving"]))
    if stopping:
        spec["earlyStopping"] = {
            "algorithm": stopping,
            "startupTrials": 1,
            "minSteps": 10,
            "action": draw(st.sampled_from(["Suspend", "Delete"])),
        }
    return spec


class SweepUnderEvents(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = T0
        self.recorded: dict[int, Any] = {}  # trial number -> parameters, as first recorded
        self.finished: dict[int, str] = {}  # trial number -> phase, once finished
        self.terminal: Manifest | None = None  # the sweep's status once Succeeded or Failed
        self.seen_started: set[str] = set()  # jobs whose trial the status has recorded as started
        self.never_again: dict[str, int] = {}  # jobs deleted by a user after their trial started: creations then

    @initialize(spec=sweep_specs())
    def submit(self, spec: Manifest) -> None:
        manifest = sweep_manifest(NAME, **spec)
        manifest["metadata"].update(namespace=NS, uid=UID, generation=1, resourceVersion="1")
        self.cluster = FakeSweepCluster(manifest)
        self.spec = TrainingSweep.from_manifest(manifest).spec

    @rule(crash_after=st.none() | st.integers(0, 4))
    def reconcile(self, crash_after: int | None) -> None:
        self.cluster.writes_left = crash_after
        try:
            reconcile_sweep(self.cluster, NS, NAME, now=self.now)
            TOTALS["reconciles"] += 1
        except Crash:
            TOTALS["crashes"] += 1
        finally:
            self.cluster.writes_left = None

    def _job(self, data: st.DataObject) -> Manifest | None:
        active = [j for j in self.cluster.jobs.values() if j["status"]["phase"] in ("Pending", "Running")]
        return data.draw(st.sampled_from(active)) if active else None

    @rule(data=st.data())
    def job_runs(self, data: st.DataObject) -> None:
        job = self._job(data)
        if job is not None:
            job["status"]["phase"] = "Running"

    @rule(data=st.data(), values=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=3))
    def job_evaluates(self, data: st.DataObject, values: list[float]) -> None:
        job = self._job(data)
        if job is None or job["spec"].get("runPolicy", {}).get("suspend"):
            return
        evaluations = job["status"].setdefault("history", {"evaluations": []})["evaluations"]
        for value in values:
            step = 10 * (len(evaluations) + 1)
            evaluations.append({"step": step, "time": self.now.isoformat(), "metrics": {"accuracy": value}})
        job["status"]["phase"] = "Running"
        TOTALS["evaluations"] += len(values)

    @rule(data=st.data(), final=st.none() | st.floats(0.0, 1.0))
    def job_succeeds(self, data: st.DataObject, final: float | None) -> None:
        job = self._job(data)
        if job is not None:
            job["status"]["phase"] = "Succeeded"
            metrics = {} if final is None else {"accuracy": final}
            job["status"]["result"] = {"metrics": metrics, "metricsStep": 100}

    @rule(data=st.data())
    def job_fails(self, data: st.DataObject) -> None:
        job = self._job(data)
        if job is not None:
            job["status"]["phase"] = "Failed"

    @rule(data=st.data())
    def user_deletes_a_job(self, data: st.DataObject) -> None:
        names = sorted(self.cluster.jobs)
        if names:
            name = data.draw(st.sampled_from(names))
            self.cluster.jobs.pop(name)
            if name in self.seen_started:
                self.never_again[name] = self.cluster.created[name]
            TOTALS["deleted by a user"] += 1

    @rule(seconds=st.sampled_from([1, 30]))
    def clock(self, seconds: int) -> None:
        self.now += timedelta(seconds=seconds)

    @invariant()
    def trials_are_never_lost_repeated_or_changed(self) -> None:
        if not hasattr(self, "cluster"):
            return
        status = TrainingSweepStatus.model_validate(self.cluster.sweep.get("status") or {}, by_alias=True)
        assert [t.number for t in status.trials] == list(range(len(status.trials)))
        assert len(status.trials) <= trial_budget(self.spec)
        for trial in status.trials:
            assert self.recorded.setdefault(trial.number, trial.parameters) == trial.parameters
            if trial.number in self.finished:
                assert trial.phase.value == self.finished[trial.number], "a finished trial changed"
            elif trial.phase.is_finished:
                self.finished[trial.number] = trial.phase.value
                TOTALS[f"trials {trial.phase.value} ({trial.reason or 'ok'})"] += 1
            if trial.start_time is not None:
                self.seen_started.add(trial.job_name)
        for job in self.cluster.jobs.values():  # every job is a recorded trial, with its parameters
            number = int(job["metadata"]["labels"][TRIAL_LABEL])
            assert json.loads(job["metadata"]["annotations"][PARAMETERS_ANNOTATION]) == self.recorded[number]
        for name, count in self.never_again.items():  # its trial failed (JobDeleted): the job is not run again
            assert self.cluster.created[name] == count, f"{name} was created again after its trial had started"
        running = [
            j
            for j in self.cluster.jobs.values()
            if j["status"]["phase"] in ("Pending", "Running") and not j["spec"].get("runPolicy", {}).get("suspend")
        ]
        assert len(running) <= self.spec.parallelism, "more trials running than parallelism"
        if self.terminal is not None:
            assert self.cluster.sweep["status"] == self.terminal, "a finished sweep changed"
        elif status.phase.is_terminal:
            self.terminal = copy.deepcopy(self.cluster.sweep["status"])
            TOTALS[f"sweeps {status.phase.value}"] += 1

    def teardown(self) -> None:
        TOTALS["sequences"] += 1


def test_sweeps_hold_their_invariants_under_random_events() -> None:
    run_model(SweepUnderEvents, seed_value=SEED, examples=EXAMPLES, steps=STEPS, totals=TOTALS)
