"""A sweep of thousands of trials unpacks only its unfinished trials' jobs: the trials store keeps each job's head
(what the sweep reads of a finished trial's job) beside the packed job, and a reconcile from the stores, asking whole
only for the jobs it looks inside, decides and writes exactly as one given every job whole. And the many trials'
reports wake their sweep at most once per batch window."""

import copy
from datetime import timedelta
from typing import Any

import pytest
from kubernetes import client
from tests.support.builders import SWEEP_UID, T0, sweep_manifest

from trainingjob.kube.client import Connection
from trainingjob.kube.ports import Manifest
from trainingjob.model.sweep import TrainingSweep
from trainingjob.model.sweep_status import ObjectivePoint, SweepPhase, TrainingSweepStatus, Trial, TrialPhase
from trainingjob.reconcile.sweep import reconcile_sweep
from trainingjob.runtime.cached import CachedSweepCluster
from trainingjob.runtime.controller import Controller
from trainingjob.runtime.memory import Stores, trial_head
from trainingjob.runtime.metrics import Metrics
from trainingjob.settings import OperatorSettings
from trainingjob.sweep.plan import job_name
from trainingjob.sweep.trial_jobs import trial_manifest
from trainingjob.sweep.trials import child

pytestmark = pytest.mark.fast
OWNER = {"apiVersion": "v1", "kind": "TrainingSweep", "name": "sweep", "uid": SWEEP_UID, "controller": True}
OTHER = {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "cm-uid"}


@pytest.mark.parametrize(
    "metadata",
    [
        pytest.param({"ownerReferences": [OWNER]}, id="the-sweeps"),
        pytest.param({"ownerReferences": [OTHER, OWNER]}, id="beside-another-owner"),
        pytest.param({"ownerReferences": [OTHER]}, id="owned-by-no-controller"),
        pytest.param({}, id="a-namesake-without-owners"),
        pytest.param({"ownerReferences": [OWNER], "deletionTimestamp": T0.isoformat()}, id="being-deleted"),
    ],
)
def test_a_jobs_head_reads_as_the_whole_job_does_for_what_a_sweep_knows_of_it(metadata: Manifest) -> None:
    named = {"name": "sweep-1", "namespace": "ns", "uid": "u1", "resourceVersion": "7", **metadata}
    named.update(creationTimestamp=T0.isoformat(), labels={"a": "b"}, annotations={"c": "d" * 100})
    whole: Manifest = {
        "apiVersion": "trainingjob.io/v1alpha1",
        "kind": "TrainingJob",
        "metadata": named,
        "spec": {"workers": {"replicas": 2}},
        "status": {"phase": "Succeeded"},
    }
    head = trial_head(whole)
    assert child(head, parse=False) == child(whole, parse=False)
    assert head["metadata"]["uid"] == "u1" and "status" not in head and "labels" not in head["metadata"]


def _trial(number: int, phase: TrialPhase, values: list[float]) -> Trial:
    curve = [ObjectivePoint(step=125 * (i + 1), value=v) for i, v in enumerate(values)]  # at sixteenths of 1000
    return Trial(
        number=number,
        job_name=job_name("sweep", number),
        parameters={"lr": 0.01 * (number + 1), "batch": 16},
        phase=phase,
        objective=values[-1],
        objective_step=curve[-1].step,
        curve=curve,
        total_steps=1000,
        start_time=T0,
        completion_time=T0 if phase.is_finished else None,
    )


def _world() -> tuple[Manifest, list[Manifest]]:
    """Six succeeded trials, one failed, three running (one far behind the others: median-pruned), a place free."""
    manifest = sweep_manifest(parallelism=4, maxTrials=20, earlyStopping={"algorithm": "Median", "startupTrials": 3})
    manifest["metadata"].update(namespace="ns", uid=SWEEP_UID, generation=1, resourceVersion="1")
    sweep = TrainingSweep.from_manifest(manifest)
    trials = [_trial(n, TrialPhase.SUCCEEDED, [0.5, 0.6 + n / 100]) for n in range(6)]
    trials.append(_trial(6, TrialPhase.FAILED, [0.1]))
    trials += [
        _trial(7, TrialPhase.RUNNING, [0.55]),
        _trial(8, TrialPhase.RUNNING, [0.05]),
        _trial(9, TrialPhase.RUNNING, [0.6]),
    ]
    jobs = []
    for trial in trials:
        job = trial_manifest(sweep, trial)
        job["metadata"].update(uid=f"job-{trial.number}", resourceVersion="5", creationTimestamp=T0.isoformat())
        evaluations = [{"step": p.step, "time": T0.isoformat(), "metrics": {"accuracy": p.value}} for p in trial.curve]
        phases = {TrialPhase.SUCCEEDED: "Succeeded", TrialPhase.FAILED: "Failed", TrialPhase.RUNNING: "Running"}
        progress = {"step": trial.curve[-1].step, "totalSteps": 1000}
        job["status"] = {"phase": phases[trial.phase], "history": {"evaluations": evaluations}, "progress": progress}
        if trial.phase == TrialPhase.SUCCEEDED:
            job["status"]["result"] = {"metrics": {"accuracy": trial.objective}, "metricsStep": 1000}
        jobs.append(job)
    status = TrainingSweepStatus(phase=SweepPhase.RUNNING, trials=trials)
    manifest["status"] = status.model_dump(mode="json", by_alias=True, exclude_none=True)
    return manifest, jobs


class Writes:
    """The writes a reconcile sends, in order."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []

    def read_sweep(self, namespace: str, name: str) -> Manifest | None:
        raise AssertionError("read from the stores")

    def list_trial_jobs(self, namespace: str, sweep: str) -> list[Manifest]:
        raise AssertionError("read from the stores")

    def write_sweep_status(self, namespace: str, name: str, resource_version: str, patch: Manifest) -> str:
        self.sent.append(("status", copy.deepcopy(patch)))
        return str(int(resource_version) + 1)

    def create_job(self, namespace: str, manifest: Manifest) -> str | None:
        self.sent.append(("create", manifest["metadata"]["name"]))
        return None

    def suspend_job(self, namespace: str, name: str) -> None:
        self.sent.append(("suspend", name))

    def delete_job(self, namespace: str, name: str, uid: str) -> None:
        self.sent.append(("delete", name))


class WholeJobs(CachedSweepCluster):
    """The same stores, every trial's job listed whole (not a TrialJobsInPart); it counts what it unpacked."""

    list_trial_jobs_in_part = None  # type: ignore[assignment]


def test_a_reconcile_from_the_stores_in_part_decides_and_writes_as_one_from_every_job_whole() -> None:
    sweep, jobs = _world()
    stores = Stores()
    stores.sweeps.apply("ADDED", sweep)
    for job in jobs:
        stores.trials.apply("ADDED", job)
    now = T0 + timedelta(minutes=1)
    in_part, whole = Writes(), Writes()
    ours = reconcile_sweep(CachedSweepCluster(in_part, stores), "ns", "sweep", now=now)
    theirs = reconcile_sweep(WholeJobs(whole, stores), "ns", "sweep", now=now)
    assert ours == theirs and in_part.sent == whole.sent
    assert ("delete", "sweep-8") in in_part.sent and ("create", "sweep-10") in in_part.sent  # pruned: its job ends
    heads = stores.trials.of_job("ns", "sweep", {"sweep-7", "sweep-8", "sweep-9"})
    assert sum("status" in j for j in heads) == 3, "only the running trials' jobs unpacked"


def test_a_sweep_waits_its_own_batch_window_after_a_change_before_its_reconcile() -> None:
    """Every trial's progress report changes its job, and each change wakes the sweep: the sweep queue waits
    sweep_batch_seconds (ReconcileQueue merges the wake-ups meanwhile, tests/unit/test_queue.py), the job queue its
    own much shorter window."""
    settings = OperatorSettings(leader_election=False, sweep_batch_seconds=7.5)
    built = Controller(settings, Connection(client.ApiClient(), "ns"), Metrics())
    assert built.sweep_queue.batch_seconds == 7.5 and built.job_queue.batch_seconds == settings.batch_seconds
    assert OperatorSettings().sweep_batch_seconds >= 1, "a sweep of thousands of trials reconciled on every report"
