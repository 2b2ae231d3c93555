"""An in-memory apiserver for a sweep's reconcile (the SweepCluster port, read directly or through the operator's
watch-fed stores, tests/support/fake_watch.py): resourceVersions (a status written on a stale version is a
Conflict), the status checked against its schema, spec edits the CRD's rules refuse, TrainingJobs created (one
of that name there is taken as created when it is the sweep's, as taken when not, as the apiserver port answers),
refused (a quota, a webhook) while `refusal` is set, suspended, and deleted
only by the UID the reconcile read; namesakes (TrainingJobs not the sweep's); and the operator killed at any
write. Every trial job's evaluation goes through the job operator's own thinning of its history. Every job has its
checkpoint folder on one shared volume; a trial's rank 0, as it starts, removes the folders its job was told to."""

import copy
import itertools
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from trainingjob.kube.ports import Conflict
from trainingjob.local.cluster import merge_patched
from trainingjob.model.history import MAX_EVALUATIONS, EvaluationPoint
from trainingjob.model.sweep import TrainingSweep
from trainingjob.model.sweep_status import TrainingSweepStatus
from trainingjob.plan.history import added
from trainingjob.sweep.checkpoints import told
from trainingjob.sweep.creation import NAME_TAKEN_ANSWER
from trainingjob.sweep.trials import SWEEP_LABEL, controller_of

Manifest = dict[str, Any]
Key = tuple[str, str]


class Crash(Exception):  # noqa: N818  (the operator killed mid-reconcile)
    pass


@dataclass
class FakeSweepCluster:
    clock: Callable[[], datetime]
    sweeps: dict[Key, Manifest] = field(default_factory=dict)
    jobs: dict[Key, Manifest] = field(default_factory=dict)  # every TrainingJob: trials' and namesakes
    refusal: str | None = None  # the apiserver's answer to a TrainingJob create while it refuses them
    writes_left: int | None = None  # the operator dies at the write after this many
    created: Counter[str] = field(default_factory=Counter)  # job name -> jobs of that name the sweep created
    acted: list[tuple[str, str, str]] = field(default_factory=list)  # (suspend or delete, job name, its UID then)
    on_written: Callable[[Manifest], None] = lambda _: None
    volume: set[str] = field(default_factory=set)  # the checkpoint folders (<job name>/<job uid>) on the volume
    told: list[tuple[list[str], Manifest]] = field(default_factory=list)  # (folders named, the sweep's status then)
    trainers: set[str] = field(default_factory=set)  # the UIDs of the jobs whose rank 0 has started
    _versions: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def trials(self) -> dict[Key, Manifest]:
        """The TrainingJobs with a sweep label (what the operator's trials informer lists)."""
        return {k: j for k, j in self.jobs.items() if SWEEP_LABEL in (j["metadata"].get("labels") or {})}

    def version(self) -> str:
        return str(next(self._versions))

    def _write(self) -> None:
        if self.writes_left is not None:
            if self.writes_left == 0:
                raise Crash
            self.writes_left -= 1

    # -- the SweepCluster port ----------------------------------------------------------------------------

    def read_sweep(self, namespace: str, name: str) -> Manifest | None:
        found = self.sweeps.get((namespace, name))
        return copy.deepcopy(found) if found is not None else None

    def list_trial_jobs(self, namespace: str, sweep: str) -> list[Manifest]:
        own = [
            j for (ns, _), j in self.trials.items() if ns == namespace and j["metadata"]["labels"][SWEEP_LABEL] == sweep
        ]
        return copy.deepcopy(own)

    def write_sweep_status(self, namespace: str, name: str, resource_version: str, patch: Manifest) -> str:
        sweep = self.sweeps[(namespace, name)]
        if resource_version != sweep["metadata"]["resourceVersion"]:
            raise Conflict(name)
        self._write()
        merged = merge_patched(sweep.get("status") or {}, patch)
        status = TrainingSweepStatus.model_validate(merged, by_alias=True)  # what the CRD's schema would store
        sweep["status"] = status.model_dump(mode="json", by_alias=True, exclude_none=True)
        sweep["metadata"]["resourceVersion"] = self.version()
        self.on_written(copy.deepcopy(sweep))
        return str(sweep["metadata"]["resourceVersion"])

    def create_job(self, namespace: str, manifest: Manifest) -> str | None:
        self._write()
        name = manifest["metadata"]["name"]
        if self.refusal is not None:
            return self.refusal
        there = self.jobs.get((namespace, name))
        if there is None:
            self.created[name] += 1
            self._add(namespace, copy.deepcopy(manifest), f"{name}-{self.created[name]}")
            sweep = self.sweeps[(namespace, manifest["metadata"]["labels"][SWEEP_LABEL])]
            self.told.append((told(manifest["metadata"].get("annotations")), copy.deepcopy(sweep.get("status") or {})))
        return None if there is None or controller_of(there) == controller_of(manifest) else NAME_TAKEN_ANSWER

    def suspend_job(self, namespace: str, name: str) -> None:
        self._write()
        job = self.jobs.get((namespace, name))
        self.acted.append(("suspend", name, job["metadata"]["uid"] if job else ""))
        if job is not None:
            job["spec"].setdefault("runPolicy", {})["suspend"] = True
            job["metadata"]["generation"] += 1
            job["metadata"]["resourceVersion"] = self.version()

    def delete_job(self, namespace: str, name: str, uid: str) -> None:
        self._write()
        job = self.jobs.get((namespace, name))
        if job is not None and job["metadata"]["uid"] == uid:  # else 409: a precondition failed
            self.acted.append(("delete", name, uid))
            del self.jobs[(namespace, name)]

    # -- users and the job operator -----------------------------------------------------------------------

    def _add(self, namespace: str, job: Manifest, uid: str) -> None:
        job["metadata"].update(
            namespace=namespace,
            uid=uid,
            generation=1,
            creationTimestamp=self.clock().isoformat(),
            resourceVersion=self.version(),
        )
        job["status"] = {"phase": "Pending"}
        self.jobs[(namespace, job["metadata"]["name"])] = job
        self.volume.add(f"{job['metadata']['name']}/{uid}")  # its checkpoints, as it will write them

    def start_trainer(self, job: Manifest) -> None:
        """The job's rank 0 starts (once): it removes the folders its job was told to and reports them gone."""
        uid = job["metadata"]["uid"]
        if uid in self.trainers:
            return
        self.trainers.add(uid)
        named = told(job["metadata"].get("annotations"))
        if named:
            self.volume.difference_update(named)
            job["status"].setdefault("progress", {"attempt": 0})["checkpointsCleared"] = named

    def submit_sweep(self, manifest: Manifest) -> None:
        manifest["metadata"].update(generation=1, resourceVersion=self.version())
        self.sweeps[(manifest["metadata"]["namespace"], manifest["metadata"]["name"])] = manifest

    def edit_sweep(self, key: Key, change: Callable[[Manifest], None]) -> bool:
        """A user's edit of the sweep's spec: stored (a new generation) unless the CRD's rules refuse it."""
        edited = copy.deepcopy(self.sweeps[key])
        change(edited["spec"])
        try:
            TrainingSweep.from_manifest(edited)
        except ValidationError:
            return False
        edited["metadata"].update(generation=edited["metadata"]["generation"] + 1, resourceVersion=self.version())
        self.sweeps[key] = edited
        return True

    def add_namesake(self, namespace: str, name: str, labels: dict[str, str]) -> None:
        """A TrainingJob of that name that is not the sweep's: a user's own, or an orphan of an earlier sweep."""
        if (namespace, name) not in self.jobs:
            job: Manifest = {"apiVersion": "trainingjob.io/v1", "kind": "TrainingJob", "spec": {"trainer": {}}}
            job["metadata"] = {"name": name, "labels": labels}
            self._add(namespace, job, f"namesake-{name}-{self.version()}")

    def evaluate(self, job: Manifest, step: int, metric: str, value: float, total: int) -> None:
        """Rank 0 evaluated at `step`; the job's reconcile read it: in the progress, and in the history thinned as
        the job operator thins it."""
        status = job["status"]
        history = status.setdefault("history", {"evaluations": [], "evaluationEverySteps": 1})
        point = EvaluationPoint(step=step, time=self.clock(), metrics={metric: value})
        old = [EvaluationPoint.model_validate(e, by_alias=True) for e in history["evaluations"]]
        kept, every = added(old, history["evaluationEverySteps"], point, MAX_EVALUATIONS)
        history.update(
            evaluations=[e.model_dump(mode="json", by_alias=True, exclude_none=True) for e in kept],
            evaluationEverySteps=every,
        )
        self.start_trainer(job)
        progress = status.setdefault("progress", {"attempt": 0})
        progress.update(step=step, totalSteps=total, metrics={metric: value}, metricsStep=step)
        status["phase"] = "Running"
