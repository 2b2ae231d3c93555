"""Local mode for sweeps: the sweep.reconcile.SweepCluster protocol on this machine. Each trial's TrainingJob is a
local job (trainingjob.local.cluster.LocalCluster, its pods local processes); the same sweep planner samples, prunes and
ranks, and the same job planner runs every trial, so a sweep behaves as it does on a cluster."""

import copy
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from trainingjob.local.cluster import LOCAL_SETTINGS, LocalCluster, merge_patched
from trainingjob.local.pod import Manifest, now_stamp
from trainingjob.model.sweep_status import TrainingSweepStatus
from trainingjob.plan import Event
from trainingjob.reconcile.job import reconcile
from trainingjob.reconcile.sweep import reconcile_sweep

NAMESPACE = "local"
TrialEvent = Callable[[str, Event], None]  # (the trial's job name, an event of its job)


@dataclass
class LocalSweep:
    """One sweep and its trials' jobs on this machine; each job's work folder is <workdir>/<job name>."""

    sweep: Manifest
    workdir: Path
    on_event: TrialEvent = lambda job, event: None
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

    def create_job(self, namespace: str, manifest: Manifest) -> None:
        name = str(manifest["metadata"]["name"])
        if name not in self.jobs:
            self.jobs[name] = LocalCluster(
                copy.deepcopy(manifest), self.workdir / name, lambda event: self.on_event(name, event)
            )

    def suspend_job(self, namespace: str, name: str) -> None:
        """As a merge patch of spec.runPolicy.suspend would: the job's next reconcile stops its pods."""
        job = self.jobs.get(name)
        if job is not None and not job.deleted:
            job.job["spec"].setdefault("runPolicy", {})["suspend"] = True
            job.job["metadata"]["generation"] += 1

    def delete_job(self, namespace: str, name: str) -> None:
        """As the garbage collector would: the job goes, and its pods with it (SIGTERM, SIGKILL after the grace)."""
        job = self.jobs.get(name)
        if job is not None:
            job.delete_pods(namespace, list(job.pods))
            job.delete_job(namespace, name)

    def run_trials(self, now: datetime) -> bool:
        """One reconcile of every trial's job that is not done; whether any of them still has work or processes."""
        busy = False
        for name, job in self.jobs.items():
            if job.deleted:
                busy = busy or bool(job.list_pods(NAMESPACE, name))  # reaps the deleted job's pods as they end
                continue
            if _done(job):
                continue
            reconcile(job, NAMESPACE, name, now=now, settings=LOCAL_SETTINGS)
            busy = busy or not _done(job)
        return busy

    def run(
        self, on_status: Callable[[TrainingSweepStatus], None], poll_seconds: float = 0.25
    ) -> TrainingSweepStatus | None:
        """Reconcile the sweep, then its trials' jobs, until it has ended and no trial has a process left."""
        status: TrainingSweepStatus | None = None
        try:
            while True:
                outcome = reconcile_sweep(self, NAMESPACE, self.name, now=datetime.now(UTC))
                if outcome.after is None:
                    return status
                status = outcome.after
                on_status(status)
                busy = self.run_trials(datetime.now(UTC))
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
) -> tuple[TrainingSweepStatus | None, LocalSweep]:
    """Run a sweep (checked valid by the caller) to its end on this machine: its final status and its trials."""
    sweep = LocalSweep(copy.deepcopy(manifest), workdir, on_event)
    return sweep.run(on_status), sweep
