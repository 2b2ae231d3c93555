"""The pure planner: plan(job, observed, now) -> what to create, delete, write and say. No I/O, no clock."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from trainingjob import failures
from trainingjob.conditions import set_condition
from trainingjob.contract import ROLE_PS
from trainingjob.manifests import pod_manifest, replicas, service_manifest
from trainingjob.model import (
    ConditionType,
    FailureClass,
    Mode,
    Phase,
    ReplicaStatus,
    TrainingJob,
    TrainingJobStatus,
)
from trainingjob.naming import Replica
from trainingjob.observe import Observed, PodPhase, PodState

_PHASE_CONDITIONS = {
    Phase.RUNNING: ConditionType.RUNNING,
    Phase.RESTARTING: ConditionType.RESTARTING,
    Phase.SUSPENDED: ConditionType.SUSPENDED,
    Phase.SUCCEEDED: ConditionType.SUCCEEDED,
    Phase.FAILED: ConditionType.FAILED,
}


@dataclass(frozen=True)
class Event:
    """A Kubernetes Event about the job."""

    type: str  # Normal or Warning
    reason: str
    message: str


@dataclass(frozen=True)
class Settings:
    """Operator-wide knobs the planner needs."""

    backoff_base_seconds: float = 10.0
    backoff_max_seconds: float = 300.0


@dataclass
class Plan:
    """What one reconcile does: write `status` first, then delete, then create, then emit events."""

    status: TrainingJobStatus
    create: list[dict[str, Any]] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    requeue_after: float | None = None
    delete_job: bool = False

    def requeue(self, seconds: float) -> None:
        seconds = max(seconds, 0.5)
        self.requeue_after = seconds if self.requeue_after is None else min(self.requeue_after, seconds)


class Planner:
    """One planning pass over one job, as small policy steps that share the job, the pods and the clock."""

    def __init__(self, job: TrainingJob, observed: Observed, now: datetime, settings: Settings) -> None:
        self.job, self.observed, self.now, self.settings = job, observed, now, settings
        self.out = Plan(status=(job.status or TrainingJobStatus()).model_copy(deep=True))
        self.uid = str(getattr(job.metadata, "uid", "") or "")
        self.policy = job.spec.run_policy

    @property
    def status(self) -> TrainingJobStatus:
        return self.out.status

    def say(self, kind: str, reason: str, message: str) -> None:
        self.out.events.append(Event(kind, reason, message))

    def condition(self, kind: ConditionType, holds: bool, reason: str, message: str) -> None:
        self.status.conditions = set_condition(
            self.status.conditions,
            kind,
            holds,
            reason,
            message,
            now=self.now,
            generation=self.job.metadata.generation,
        )

    def move_to(self, phase: Phase, reason: str, message: str) -> None:
        """Set the phase and the conditions that mirror it; a change of phase is also an Event."""
        if self.status.phase != phase:
            self.say("Warning" if phase in (Phase.FAILED, Phase.RESTARTING) else "Normal", reason, message)
        self.status.phase = phase
        present = {c.type for c in self.status.conditions}
        for candidate, kind in _PHASE_CONDITIONS.items():
            if candidate == phase or kind in present or kind == ConditionType.RUNNING:
                self.condition(kind, candidate == phase, reason, message)
        if phase.is_terminal:
            self.status.completion_time = self.now

    def delete(self, pods: list[PodState]) -> None:
        self.out.delete.extend(p.name for p in pods if not p.deleting)

    # -- the policies, in the order plan() applies them ------------------------------------------------------

    def finished(self) -> None:
        """A terminal job: clean pods by cleanPodPolicy, delete the job after its TTL, never recreate."""
        pods = list(self.observed.pods)
        clean = self.policy.clean_pod_policy.value
        self.delete(pods if clean == "All" else [p for p in pods if not p.is_finished] if clean == "Running" else [])
        ttl, done = self.policy.ttl_seconds_after_finished, self.status.completion_time
        if ttl is not None and done is not None:
            left = (done + timedelta(seconds=ttl) - self.now).total_seconds()
            if left <= 0:
                self.out.delete_job = True
            else:
                self.out.requeue(left)

    def suspend(self) -> None:
        """Suspended (by a user or Kueue): no pods; they get SIGTERM and their grace period to checkpoint."""
        self.delete(list(self.observed.pods))
        if self.status.phase != Phase.SUSPENDED:
            self.move_to(Phase.SUSPENDED, "JobSuspended", "The job is suspended; its pods were stopped.")

    def resume_if_suspended(self) -> None:
        if self.status.phase == Phase.SUSPENDED and self.status.attempt > 0:
            self.status.attempt += 1
            self.say("Normal", "JobResumed", f"The job resumed as attempt {self.status.attempt}.")
        if self.status.phase == Phase.SUSPENDED:
            self.condition(ConditionType.SUSPENDED, False, "JobResumed", "The job was resumed.")

    def active_deadline_passed(self) -> bool:
        limit, started = self.policy.active_deadline_seconds, self.status.start_time
        if limit is None or started is None:
            return False
        left = (started + timedelta(seconds=limit) - self.now).total_seconds()
        if left > 0:
            self.out.requeue(left)
            return False
        self.fail("DeadlineExceeded", f"The job ran longer than activeDeadlineSeconds ({limit} s).")
        return True

    def fail(self, reason: str, message: str) -> None:
        self.move_to(Phase.FAILED, reason, message)
        self.finished()

    def start_first_attempt(self) -> None:
        if self.status.attempt == 0:
            self.status.attempt = 1
            self.condition(ConditionType.CREATED, True, "JobCreated", "The job's pods are being created.")
            self.say("Normal", "JobCreated", "Creating the pods of attempt 1.")

    def restart_attempt(self, failure: FailureClass, culprit: PodState, verdict: failures.Verdict) -> None:
        """End the current attempt: all its pods go, and the next attempt starts after the backoff."""
        self.status.restarts = failures.counted(self.status.restarts, failure)
        self.status.last_failure = failures.last_failure(culprit, failure, self.now)
        self.status.attempt += 1
        self.delete(list(self.observed.pods))
        message = f"{verdict.message} Restarting as attempt {self.status.attempt} from the newest checkpoint."
        self.move_to(Phase.RESTARTING, verdict.reason, message)

    def handle_failures(self, current: list[PodState], missing: list[Replica]) -> bool:
        """Restart or fail for failed or vanished pods of the attempt; True when anything was done."""
        failed = [p for p in current if p.has_failed]
        vanished = [_vanished(r, self.job, self.status.attempt) for r in missing]
        if not failed and not vanished:
            return False
        if self.job.spec.mode == Mode.PARAMETER_SERVER and all(p.replica.role != ROLE_PS for p in failed + vanished):
            return self.replace_worker(failed, vanished)
        failure, culprit = failures.root_cause(failed + vanished, self.policy)
        verdict = failures.decide(failure, self.status.restarts, self.policy, failures.describe(culprit))
        if verdict.restart:
            self.restart_attempt(failure, culprit, verdict)
        else:
            self.status.last_failure = failures.last_failure(culprit, failure, self.now)
            self.fail(verdict.reason, verdict.message)
        return True

    def replace_worker(self, failed: list[PodState], vanished: list[PodState]) -> bool:
        """ParameterServer mode: a failed worker restarts alone, one per pass; the others keep training."""
        pod = (failed + vanished)[0]
        last = self.status.last_failure
        if last and (last.attempt, last.pod) == (pod.attempt, pod.name) and (not pod.uid or last.pod_uid == pod.uid):
            self.replace(pod)  # counted by an earlier pass that did not get to replace it
            return True
        failure = failures.classify(pod, self.policy)
        verdict = failures.decide(failure, self.status.restarts, self.policy, failures.describe(pod))
        self.status.last_failure = failures.last_failure(pod, failure, self.now)
        if not verdict.restart:
            self.fail(verdict.reason, verdict.message)
            return True
        self.status.restarts = failures.counted(self.status.restarts, failure)
        self.say("Warning", verdict.reason, f"{verdict.message} Replacing worker {pod.replica.index} alone.")
        self.replace(pod)
        return True

    def replace(self, pod: PodState) -> None:
        """Delete a failed pod; once it is gone, create its replacement under the same name."""
        if pod.uid:
            self.delete([pod])
        else:
            self.create([pod.replica])

    def create(self, missing: list[Replica]) -> None:
        if not self.observed.service_exists and not self.out.create:
            self.out.create.append(service_manifest(self.job, self.uid))
        self.out.create.extend(pod_manifest(self.job, self.uid, r, self.status.attempt) for r in missing)
        if self.status.start_time is None:
            self.status.start_time = self.now

    def restart_at(self) -> datetime | None:
        """When the current attempt may start: after an exponential backoff from the failure that ended the last."""
        last = self.status.last_failure
        if last is None or last.attempt != self.status.attempt - 1:
            return None
        restarts = self.status.restarts
        total = failures.budget_used(restarts) + restarts.disruption
        delay = min(self.settings.backoff_base_seconds * 2 ** max(total - 1, 0), self.settings.backoff_max_seconds)
        return last.time + timedelta(seconds=delay)

    def succeeded(self, current: list[PodState]) -> bool:
        workers = [p for p in current if p.replica.role != ROLE_PS]
        count = self.job.spec.workers.replicas
        if len(workers) < count or any(p.phase != PodPhase.SUCCEEDED for p in workers):
            return False
        self.move_to(Phase.SUCCEEDED, "JobSucceeded", f"All {count} workers finished successfully.")
        self.finished()
        return True

    def start_missing(self, missing: list[Replica], stale: list[PodState]) -> None:
        """Create the attempt's missing pods together, once the last attempt's pods are gone and backoff is over."""
        restart_at = self.restart_at()
        if stale:
            self.out.requeue(1)
        elif restart_at is not None and restart_at > self.now:
            self.out.requeue((restart_at - self.now).total_seconds())
        else:
            self.create(missing)

    def update_phase(self, current: list[PodState], missing: list[Replica]) -> bool:
        """Running when every pod of the attempt runs; otherwise Pending (first attempt) or Restarting."""
        all_up = not missing and all(p.phase in (PodPhase.RUNNING, PodPhase.SUCCEEDED) for p in current)
        attempt = self.status.attempt
        if all_up and self.status.phase != Phase.RUNNING:
            self.move_to(
                Phase.RUNNING,
                "AllReplicasRunning",
                f"All {len(current)} pods of attempt {attempt} are running.",
            )
        elif not all_up and self.status.phase == Phase.RUNNING:
            self.move_to(
                Phase.RESTARTING if attempt > 1 else Phase.PENDING,
                "PodsStarting",
                "Some pods are not running yet.",
            )
        elif not all_up and self.status.phase == Phase.SUSPENDED:
            self.move_to(Phase.RESTARTING, "JobResumed", f"The job resumed; starting attempt {attempt}.")
        return all_up

    def startup_deadline_passed(self, current: list[PodState], all_up: bool) -> bool:
        limit = self.policy.startup_deadline_seconds
        created = [p.created for p in current if p.created is not None]
        if limit is None or all_up or not created:
            return False
        left = (min(created) + timedelta(seconds=limit) - self.now).total_seconds()
        if left > 0:
            self.out.requeue(left)
            return False
        waiting = [p for p in current if p.phase == PodPhase.PENDING]
        why = next((p.unschedulable for p in waiting if p.unschedulable), "")
        message = f"{len(waiting)} of {len(replicas(self.job))} pods of attempt {self.status.attempt} were not running"
        self.fail("StartupDeadlineExceeded", f"{message} {limit} s after creation{': ' + why if why else ''}.")
        return True

    def progress_stalled(self, current: list[PodState]) -> bool:
        """No progress report for progressDeadlineSeconds while running: restart the attempt from its checkpoint."""
        limit = self.policy.progress_deadline_seconds
        running = next(
            (c for c in self.status.conditions if c.type == ConditionType.RUNNING and c.status == "True"),
            None,
        )
        if limit is None or running is None or not current:
            return False
        heartbeat = self.status.progress.last_heartbeat_time if self.status.progress else None
        since = max(t for t in (heartbeat, running.last_transition_time) if t is not None)
        left = (since + timedelta(seconds=limit) - self.now).total_seconds()
        if left > 0:
            self.out.requeue(left)
            return False
        culprit = current[-1] if current[-1].replica.role != ROLE_PS else current[0]
        stalled = f"no progress was reported for {limit} s (progressDeadlineSeconds)"
        verdict = failures.decide(FailureClass.STALLED, self.status.restarts, self.policy, stalled.capitalize())
        if verdict.restart:
            self.restart_attempt(FailureClass.STALLED, culprit, verdict)
        else:
            self.fail(verdict.reason, verdict.message)
        return True

    def record_progress(self) -> None:
        """The trainer's latest report; a new attempt's first report may lag, so a step never goes back."""
        reported, last = self.observed.progress, self.status.progress
        if reported is not None:
            behind = last is not None and reported.step < last.step
            self.status.progress = (
                last.model_copy(update={"last_heartbeat_time": reported.last_heartbeat_time})
                if last and behind
                else reported
            )
        if self.observed.checkpoint is not None:
            self.status.last_checkpoint = self.observed.checkpoint

    def count_replicas(self, current: list[PodState]) -> None:
        self.status.workers = _counts([p for p in current if p.replica.role != ROLE_PS])
        if self.job.spec.mode == Mode.PARAMETER_SERVER:
            self.status.parameter_servers = _counts([p for p in current if p.replica.role == ROLE_PS])

    def run(self) -> Plan:
        self.status.observed_generation = self.job.metadata.generation
        if self.status.phase.is_terminal:
            self.finished()
            return self.out
        if self.policy.suspend:
            self.suspend()
            return self.out
        self.resume_if_suspended()
        if self.active_deadline_passed():
            return self.out
        self.start_first_attempt()
        stale, current = (
            self.observed.not_of_attempt(self.status.attempt),
            self.observed.of_attempt(self.status.attempt),
        )
        self.delete(stale)
        present = {p.replica for p in current}
        missing = [r for r in replicas(self.job) if r not in present]
        self.count_replicas(current)
        self.record_progress()
        if self.succeeded(current):
            return self.out
        # Pods of an attempt that ran and are now gone vanished (evicted, node lost); otherwise they are yet to come.
        started = self.status.phase == Phase.RUNNING or any(p.has_started for p in current)
        if self.handle_failures(current, missing if started else []):
            return self.out
        if missing:
            self.start_missing(missing, stale)
        all_up = self.update_phase(current, missing)
        if not self.startup_deadline_passed(current, all_up):
            self.progress_stalled(current)
        return self.out


def _counts(pods: list[PodState]) -> ReplicaStatus:
    return ReplicaStatus(
        active=sum(not p.is_finished for p in pods),
        ready=sum(p.ready for p in pods),
        succeeded=sum(p.phase == PodPhase.SUCCEEDED for p in pods),
        failed=sum(p.phase == PodPhase.FAILED for p in pods),
    )


def _vanished(replica: Replica, job: TrainingJob, attempt: int) -> PodState:
    """A pod of a started attempt that is gone without our deleting it: evicted, preempted or its node lost."""
    return PodState(
        name=replica.pod_name(str(job.metadata.name), attempt),
        uid="",
        replica=replica,
        attempt=attempt,
        phase=PodPhase.UNKNOWN,
        disrupted=True,
        reason="PodDeleted",
        message="the pod was deleted before it finished (evicted, preempted, or its node was lost)",
    )


def plan(job: TrainingJob, observed: Observed, now: datetime, settings: Settings | None = None) -> Plan:
    """Decide one reconcile of `job` from what was observed; `now` is the only clock."""
    return Planner(job, observed, now, settings or Settings()).run()
