"""Pure reading of a job's pods: which replica and attempt each is, and how it is doing or how it ended."""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from trainingjob.model import CheckpointStatus, Progress
from trainingjob.naming import ATTEMPT_LABEL, INDEX_LABEL, ROLE_LABEL, Replica

# Pod reasons and condition reasons that mean the pod was pushed out, not that the job failed.
DISRUPTION_REASONS = frozenset(
    {
        "Evicted",
        "Preempting",
        "Preempted",
        "DeletionByPodGC",
        "DeletionByTaintManager",
        "NodeLost",
        "Shutdown",
        "Terminated",
        "TerminationByKubelet",
        "EvictionByEvictionAPI",
        "PreemptionByScheduler",
        "NodeShutdown",
    }
)


class PodPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


@dataclass(frozen=True)
class PodState:
    """What the operator needs to know of one pod."""

    name: str
    uid: str
    replica: Replica
    attempt: int
    phase: PodPhase
    created: datetime | None = None
    ready: bool = False
    deleting: bool = False
    disrupted: bool = False
    exit_code: int | None = None
    finished_at: datetime | None = None
    reason: str = ""
    message: str = ""
    unschedulable: str = ""  # the scheduler's message while the pod cannot be placed
    log_tail: str = ""

    @property
    def is_finished(self) -> bool:
        return self.phase in (PodPhase.SUCCEEDED, PodPhase.FAILED)

    @property
    def has_failed(self) -> bool:
        """Failed, or on its way out through an eviction, preemption or node loss."""
        return self.phase == PodPhase.FAILED or (self.disrupted and self.phase != PodPhase.SUCCEEDED)

    @property
    def has_started(self) -> bool:
        return self.phase != PodPhase.PENDING


def _parse_time(value: Any) -> datetime | None:
    if not value:
        return None
    if isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def _terminated(status: Mapping[str, Any], container: str) -> Mapping[str, Any]:
    for entry in status.get("containerStatuses") or []:
        if entry.get("name") == container:
            state = entry.get("state") or {}
            last = entry.get("lastState") or {}
            return state.get("terminated") or last.get("terminated") or {}
    return {}


def _condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), {})


def pod_state(pod: Mapping[str, Any], container: str, log_tail: str = "") -> PodState | None:
    """Read one pod (as the API returns it, camelCase); None for a pod without our labels."""
    metadata, status = pod.get("metadata") or {}, pod.get("status") or {}
    labels = metadata.get("labels") or {}
    try:
        replica = Replica(labels[ROLE_LABEL], int(labels[INDEX_LABEL]))
        attempt = int(labels[ATTEMPT_LABEL])
    except (KeyError, ValueError):
        return None
    terminated = _terminated(status, container)
    disruption = _condition(status, "DisruptionTarget")
    scheduled = _condition(status, "PodScheduled")
    reason = str(status.get("reason") or terminated.get("reason") or disruption.get("reason") or "")
    disrupted = disruption.get("status") == "True" or reason in DISRUPTION_REASONS
    return PodState(
        name=str(metadata.get("name", "")),
        uid=str(metadata.get("uid", "")),
        replica=replica,
        attempt=attempt,
        phase=PodPhase(status.get("phase") or "Pending"),
        created=_parse_time(metadata.get("creationTimestamp")),
        ready=_condition(status, "Ready").get("status") == "True",
        deleting=metadata.get("deletionTimestamp") is not None,
        disrupted=disrupted,
        exit_code=terminated.get("exitCode"),
        finished_at=_parse_time(terminated.get("finishedAt")),
        reason=reason,
        message=str(status.get("message") or terminated.get("message") or disruption.get("message") or ""),
        unschedulable=str(scheduled.get("message") or "") if scheduled.get("reason") == "Unschedulable" else "",
        log_tail=log_tail,
    )


@dataclass(frozen=True)
class Observed:
    """Everything a reconcile reads from the cluster, read once."""

    pods: tuple[PodState, ...] = ()
    service_exists: bool = False
    progress: Progress | None = None  # rank 0's last report, when it could be read
    checkpoint: CheckpointStatus | None = None

    def of_attempt(self, attempt: int) -> list[PodState]:
        return [p for p in self.pods if p.attempt == attempt]

    def not_of_attempt(self, attempt: int) -> list[PodState]:
        return [p for p in self.pods if p.attempt != attempt]


def observe(
    pods: Iterable[Mapping[str, Any]],
    container: str,
    service_exists: bool,
    log_tails: Mapping[str, str] | None = None,
) -> Observed:
    states = (pod_state(p, container, (log_tails or {}).get(p["metadata"]["name"], "")) for p in pods)
    return Observed(tuple(sorted((s for s in states if s), key=lambda s: (s.attempt, s.replica))), service_exists)


def progress_from_report(report: Mapping[str, Any]) -> tuple[Progress | None, CheckpointStatus | None]:
    """The trainer's progress report (JSON from rank 0's endpoint or file) as status fields."""
    try:
        heartbeat = report.get("heartbeat")
        progress = Progress(
            step=int(report.get("step", 0)),
            loss=report.get("loss"),
            samples_per_second=report.get("samplesPerSecond"),
            last_heartbeat_time=datetime.fromtimestamp(float(heartbeat), UTC) if heartbeat is not None else None,
        )
        checkpoint = None
        if report.get("lastCheckpointStep") is not None and report.get("lastCheckpointTime") is not None:
            checkpoint = CheckpointStatus(
                step=int(report["lastCheckpointStep"]),
                path=str(report.get("lastCheckpointPath", "")),
                time=datetime.fromtimestamp(float(report["lastCheckpointTime"]), UTC),
            )
    except (TypeError, ValueError):
        return None, None
    return progress, checkpoint
