"""Local mode for sweeps: the sweep.reconcile.SweepCluster protocol on this machine. Each trial's TrainingJob is a
local job (trainingjob.local.cluster.LocalCluster, its pods local processes); the same sweep planner samples, prunes and
ranks, and the same job planner runs every trial, so a sweep behaves as it does on a cluster.

A trial's process that stopped itself (SIGSTOP: the trainer holds so after an evaluation when a test asks it to) is
held until the sweep has judged what it reported, then continued: its job's reconcile reads the report while it
holds, the sweep's next reconcile judges it (and stops the job if it is pruned), then it goes on. Whether a trial
is stopped before it moves on is then decided by that order of events, not by how fast the machine trains."""

import copy
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from trainingjob.local.cluster import LOCAL_SETTINGS, LocalCluster, merge_patched
from trainingjob.local.files import ConfigMaps
from trainingjob.local.pod import Manifest, now_stamp
from trainingjob.model.sweep_status import TrainingSweepStatus
from trainingjob.plan import Event
from trainingjob.reconcile.job import reconcile
from trainingjob.reconcile.sweep import reconcile_sweep

NAMESPACE = "local"
TrialEvent = Callable[[str, Event], None]  # (the trial's job name, an event of its job)
Held = set[tuple[str, str]]  # (a trial's job name, its pod) whose process stopped itself


@dataclass
class LocalSweep:
    """One sweep and its trials' jobs on this machine; each job's work folder is <workdir>/<job name>."""

    sweep: Manifest
    workdir: Path
    on_event: TrialEvent = lambda job, event: None
    configmaps: ConfigMaps = field(default_factory=dict)  # the ConfigMaps beside the sweep's manifest
    jobs: dict[str, LocalCluster] = field(default_factory=dict)

    def __post_init__(self) -> None:
        metadata = self.sweep.setdefault("metadata", {})
        metadata.update(
            namespace=NAMESPACE,
            uid=str(uuid.uuid4()),
            resourceVersion="1",
            generation=1,
            creationTimestamp=now_stamp(),
        )

    @property
    def name(self) -> str:
        return str(self.sweep["metadata"]["name"])

    def read_sweep(self, namespace: str, name: str) -> Manifest | None:
        return copy.deepcopy(self.sweep)

    def list_trial_jobs(self, namespace: str, sweep: str) -> list[Manifest]:
        return [copy.deepcopy(job.job) for job in self.jobs.values() if not job.deleted]

    def write_sweep_status(self, namespace: str, name: str, resource_version: str, patch: Manifest) -> str:
        self.sweep["status"] = merge_patched(self.sweep.get("status") or {}, patch)
        self.sweep["metadata"]["resourceVersion"] = str(int(resource_version) + 1)
        return str(self.sweep["metadata"]["resourceVersion"])

    def create_job(self, namespace: str, manifest: Manifest) -> str | None:
        """A trial's job; its checkpoints go to <workdir>/<job name>/<job uid>, as on a cluster's volume
        (<checkpoint.path>/<job name>/<job uid>), so the trials remove each other's as they do there."""
        name = str(manifest["metadata"]["name"])
        if name not in self.jobs:
            job = LocalCluster(
                copy.deepcopy(manifest),
                self.workdir / name,
                lambda event: self.on_event(name, event),
                configmaps=dict(self.configmaps),
            )
            job.checkpoints = self.workdir.absolute() / name / str(job.job["metadata"]["uid"])
            self.jobs[name] = job
        return None

    def suspend_job(self, namespace: str, name: str) -> None:
        """As a merge patch of spec.runPolicy.suspend would: the job's next reconcile stops its pods."""
        job = self.jobs.get(name)
        if job is not None and not job.deleted:
            job.job["spec"].setdefault("runPolicy", {})["suspend"] = True
            job.job["metadata"]["generation"] += 1

    def delete_job(self, namespace: str, name: str, uid: str) -> None:
        """As the garbage collector would: the job of this UID goes, and its pods with it (SIGTERM, SIGKILL after
        the grace)."""
        job = self.jobs.get(name)
        if job is not None and job.job["metadata"]["uid"] == uid:
            job.delete_pods(namespace, {pod.name: pod.uid for pod in job.pods.values()})
            job.delete_job(namespace, name, uid)

    def run_trials(self, now: datetime) -> tuple[bool, Held]:
        """One reconcile of every trial's job that is not done: whether any of them still has work or processes,
        and the pods that held (stopped themselves) before their job's reconcile read their reports."""
        busy, held = False, set()
        for name, job in self.jobs.items():
            held |= {(name, pod) for pod in job.stopped_pods()}
            if job.deleted:
                busy = busy or bool(job.list_pods(NAMESPACE, name))  # reaps the deleted job's pods as they end
                continue
            if _done(job):
                continue
            reconcile(job, NAMESPACE, name, now=now, settings=LOCAL_SETTINGS)
            busy = busy or not _done(job)
        return busy, held

    def resume(self, held: Held) -> None:
        for name, pod in held:
            self.jobs[name].resume(pod)

    def run(
        self, on_status: Callable[[TrainingSweepStatus], None], poll_seconds: float = 0.25
    ) -> TrainingSweepStatus | None:
        """Reconcile the sweep, then its trials' jobs, until it has ended and no trial has a process left."""
        status: TrainingSweepStatus | None = None
        judging: Held = set()  # held pods whose reports the sweep's next reconcile judges
        try:
            while True:
                outcome = reconcile_sweep(self, NAMESPACE, self.name, now=datetime.now(UTC))
                if outcome.after is None:
                    return status
                status = outcome.after
                on_status(status)
                busy, held = self.run_trials(datetime.now(UTC))  # a pruned trial's pods are told to stop
                self.resume(judging)  # judged, and stopped if pruned: they go on
                judging = held - judging
                if status.phase.is_terminal and not busy:
                    return status
                time.sleep(poll_seconds)
        finally:
            self.stop_all()

    def stop_all(self) -> None:
        for job in self.jobs.values():
            job.stop_all()


def _done(job: LocalCluster) -> bool:
    """Finished or suspended, and no process of it left."""
    phase = (job.job.get("status") or {}).get("phase")
    settled = phase in ("Succeeded", "Failed") or (phase == "Suspended" and not job.pods)
    return settled and all(pod.process.poll() is not None for pod in job.pods.values())


def run_sweep(
    manifest: Manifest,
    workdir: Path,
    *,
    on_status: Callable[[TrainingSweepStatus], None] = lambda status: None,
    on_event: TrialEvent = lambda job, event: None,
    configmaps: ConfigMaps | None = None,
) -> tuple[TrainingSweepStatus | None, LocalSweep]:
    """Run a sweep (checked valid by the caller) to its end on this machine: its final status and its trials.
    `configmaps` (name -> data) stand in for the cluster's, for the trials' ConfigMap volumes."""
    sweep = LocalSweep(copy.deepcopy(manifest), workdir, on_event, dict(configmaps or {}))
    return sweep.run(on_status), sweep
