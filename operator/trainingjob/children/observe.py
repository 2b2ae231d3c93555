"""Pure reading of a job's children: which pods are the job's own, which replica and attempt each is, and
how it is doing or how it ended. Everything copied out of a pod is bounded here, so nothing a kubelet, a
webhook or a hostile pod writes can make a status the apiserver refuses."""

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from trainingjob.children.agent import IN_PLACE_LABEL, Gang
from trainingjob.children.naming import (
    ATTEMPT_LABEL,
    INDEX_LABEL,
    ROLE_LABEL,
    ROLES,
    TRACKING_FINALIZER,
    TRACKING_GATE,
    Replica,
)
from trainingjob.children.workload import QueueState
from trainingjob.model import CheckpointStatus, Progress

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
# The kubelet's reasons when it refuses to admit a pod the scheduler placed on its node (besides OutOf<resource>: a
# device plugin that lost a GPU, the node's labels changed since, its ports or topology taken): the node's fault.
NODE_REFUSALS = frozenset(
    {
        "UnexpectedAdmissionError",
        "NodeAffinity",
        "NodeSelectorMismatching",
        "NodePorts",
        "TopologyAffinityError",
        "SMTAlignmentError",
        "InvalidNodeInfo",
        "PodOSNotSupported",
    }
)
# The kubelet's messages when it evicts a pod for going over its own limits (no node pressure involved):
# an emptyDir over its sizeLimit, a container or the pod over its ephemeral-storage limit.
_OWN_LIMIT_EVICTIONS = re.compile(
    r"exceeds the limit|exceeded its local ephemeral storage limit|exceeds the total limit of containers"
)
REASON_LENGTH = 128
MESSAGE_LENGTH = 1024
LOG_TAIL_LENGTH = 4096
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


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
    deleting_since: datetime | None = None  # the pod's deletionTimestamp: when its grace period ends
    no_grace_left: bool = False  # being deleted with no grace period left (forced, or never scheduled)
    finalizers: tuple[str, ...] = ()  # what keeps it after its deletion, until their controllers remove them
    disrupted: bool = False  # evicted under node pressure, preempted, drained, its node lost
    over_own_limit: bool = False  # evicted for exceeding its own ephemeral-storage or emptyDir limit
    exit_code: int | None = None
    started_at: datetime | None = None  # when its trainer container started (the timeline draws it)
    finished_at: datetime | None = None
    reason: str = ""
    message: str = ""
    waiting: str = ""  # why a container waits: ImagePullBackOff, CreateContainerConfigError, ...
    unschedulable: str = ""  # the scheduler's message while the pod cannot be placed
    unschedulable_since: datetime | None = None  # since when the scheduler has said so (PodScheduled's transition)
    node: str = ""
    gated: bool = False  # still held by the tracking gate (an earlier operator's pod): never scheduled, never ran
    held_by: tuple[str, ...] = ()  # scheduling gates of other controllers (a queue, a webhook) that hold it
    held: bool = False  # holds the operator's tracking finalizer: it cannot go until the operator releases it
    in_place: bool = False  # its launcher is an agent that restarts its trainer in place (children/agent.py)
    held_up: bool = False  # its trainer has ended, another container (an injected sidecar) runs on
    controller: str = ""  # the UID of its controller (its owner reference with controller: true)
    log_tail: str = ""

    @property
    def deleting(self) -> bool:
        return self.deleting_since is not None

    @property
    def is_finished(self) -> bool:
        return self.phase in (PodPhase.SUCCEEDED, PodPhase.FAILED)

    @property
    def has_failed(self) -> bool:
        """Failed, or on its way out through an eviction, preemption or node loss."""
        return self.phase == PodPhase.FAILED or (self.disrupted and self.phase != PodPhase.SUCCEEDED)

    @property
    def refused_by_node(self) -> bool:
        """Failed because its node's kubelet would not admit it (OutOf<resource>, NODE_REFUSALS): the node's fault,
        not the job's; its trainer never ran (an exit code is the trainer's, whatever reason comes with it)."""
        refused = self.reason.startswith("OutOf") or self.reason in NODE_REFUSALS
        return refused and self.phase == PodPhase.FAILED and self.exit_code is None

    @property
    def holds_its_node(self) -> bool:
        """Whether the pod still holds what it was given on its node: unfinished, or held up by a sidecar."""
        return not self.is_finished or self.held_up

    @property
    def is_up(self) -> bool:
        return self.phase in (PodPhase.RUNNING, PodPhase.SUCCEEDED) and not self.deleting


def bounded(value: Any, limit: int) -> str:
    """A string of at most `limit` characters without control characters (newlines and tabs kept)."""
    text = value if isinstance(value, str) else ""
    return _CONTROL.sub("", text[: limit * 2])[:limit]


def _parse_time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _exit_code(value: Any) -> int | None:
    """Exit codes as the kubelet reports them (0-255, -1 for unknown); anything else is not an exit code."""
    return value if isinstance(value, int) and not isinstance(value, bool) and -1 <= value <= 255 else None


def _mappings(value: Any) -> list[Mapping[str, Any]]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def _container(status: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    return next((c for c in _mappings(status.get("containerStatuses")) if c.get("name") == name), {})


def _state(container: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    for holder in (container.get("state"), container.get("lastState")):
        found = holder.get(key) if isinstance(holder, Mapping) else None
        if isinstance(found, Mapping):
            return found
    return {}


def _init_trouble(status: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any]] | None:
    """What keeps the trainer from starting, as kubectl says it (Init:Error, Init:ImagePullBackOff): the first init
    container or sidecar that failed, as a terminated state without an exit code (the trainer's exit codes mean
    what the trainer contract says; an init container's do not), or that waits on more than its turn."""
    for init in _mappings(status.get("initContainerStatuses")):
        raw = init.get("state")
        state: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        terminated, waiting = state.get("terminated"), state.get("waiting")
        name = bounded(init.get("name"), 63)
        if isinstance(terminated, Mapping) and terminated.get("exitCode") != 0:
            said = f"container {name} exited with code {terminated.get('exitCode')}"
            detail = f": {terminated['message']}" if terminated.get("message") else ""
            reason = f"Init:{bounded(terminated.get('reason'), REASON_LENGTH) or 'Error'}"
            return {"reason": reason, "message": said + detail, "finishedAt": terminated.get("finishedAt")}, {}
        if isinstance(waiting, Mapping) and waiting.get("reason") not in (None, "", "PodInitializing"):
            message = f"container {name}" + (f": {waiting['message']}" if waiting.get("message") else "")
            return {}, {"reason": f"Init:{waiting['reason']}", "message": message}
    return None


def _phase(reported: PodPhase, trainer: Mapping[str, Any]) -> PodPhase:
    """The pod's phase as the job sees it: the trainer's container decides. Its pods never restart a container
    (restartPolicy Never), so once the trainer's own state is terminated the pod is Succeeded (exit 0) or Failed,
    whatever other containers (a mesh's injected sidecar, a log shipper) do to keep the pod Running."""
    now = trainer.get("state")
    ended = now.get("terminated") if isinstance(now, Mapping) else None
    if reported in (PodPhase.SUCCEEDED, PodPhase.FAILED) or not isinstance(ended, Mapping):
        return reported
    return PodPhase.SUCCEEDED if ended.get("exitCode") == 0 else PodPhase.FAILED


def _in_words(message: Any, exit_code: Any) -> Any:
    """A container's termination message for people: the trainer's is its last progress report (JSON, read as
    progress elsewhere), said as words; any other message as it is."""
    if not isinstance(message, str) or not message.lstrip().startswith("{"):
        return message
    try:
        report = json.loads(message)
    except ValueError:
        return message
    if not isinstance(report, dict):
        return message
    step = report.get("step")
    after = f" after step {step}" if isinstance(step, int) and not isinstance(step, bool) and step >= 0 else ""
    code = _exit_code(exit_code)
    return f"the trainer exited{f' with code {code}' if code is not None else ''}{after}"


def _others_running(status: Mapping[str, Any], container: str) -> bool:
    """Whether a container besides the trainer runs: an injected sidecar that keeps the pod up. (Without one, a
    pod whose containers all ended is still Running for a moment, until the kubelet has torn it down.)"""
    return any(
        c.get("name") != container and isinstance(c.get("state"), Mapping) and "running" in c["state"]
        for c in _mappings(status.get("containerStatuses"))
    )


def _finalizers(value: Any) -> tuple[str, ...]:
    """A pod's finalizers, the first eight, each bounded."""
    names = value if isinstance(value, list) else []
    return tuple(bounded(name, 253) for name in names if isinstance(name, str))[:8]


def _gates(spec: Any) -> tuple[str, ...]:
    """The names of a pod's scheduling gates, the first eight, each bounded."""
    gates = _mappings(spec.get("schedulingGates")) if isinstance(spec, Mapping) else []
    return tuple(bounded(g.get("name"), 253) for g in gates if isinstance(g.get("name"), str))[:8]


def holds_tracking_finalizer(pod: Mapping[str, Any]) -> bool:
    """Whether the pod holds the operator's tracking finalizer (among any number of others)."""
    names = (pod.get("metadata") or {}).get("finalizers")
    return isinstance(names, list) and TRACKING_FINALIZER in names


def _condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    return next((c for c in _mappings(status.get("conditions")) if c.get("type") == kind), {})


def controller_uid(manifest: Mapping[str, Any]) -> str:
    """The UID of the object's controller (its owner reference with controller: true), or ""."""
    owners = _mappings((manifest.get("metadata") or {}).get("ownerReferences"))
    return next((str(o.get("uid", "")) for o in owners if o.get("controller") is True), "")


def _replica(labels: Mapping[str, Any]) -> tuple[Replica, int] | None:
    try:
        role, index, attempt = str(labels[ROLE_LABEL]), int(labels[INDEX_LABEL]), int(labels[ATTEMPT_LABEL])
    except (KeyError, ValueError, TypeError):
        return None
    return (Replica(role, index), attempt) if role in ROLES and index >= 0 and attempt >= 0 else None


# What pod_state, report.final_report and the progress reader read of a pod outside its metadata and status.
OBSERVED_SPEC_FIELDS = ("nodeName", "schedulingGates")


def essentials(pod: dict[str, Any]) -> dict[str, Any]:
    """The part of a pod the operator reads (its metadata less managedFields, its status, and the spec fields
    above): what the pod store keeps, a fraction of the whole pod."""
    metadata = {k: v for k, v in (pod.get("metadata") or {}).items() if k != "managedFields"}
    spec = {k: v for k, v in (pod.get("spec") or {}).items() if k in OBSERVED_SPEC_FIELDS}
    return {"kind": pod.get("kind", "Pod"), "metadata": metadata, "spec": spec, "status": pod.get("status") or {}}


def pod_state(pod: Mapping[str, Any], container: str, log_tail: str = "") -> PodState | None:
    """Read one pod (as the API returns it, camelCase); None for a pod without our labels."""
    metadata, status = pod.get("metadata") or {}, pod.get("status") or {}
    identity = _replica(metadata.get("labels") or {})
    if identity is None:
        return None
    ours = _container(status, container)
    terminated, waiting = _state(ours, "terminated"), _state(ours, "waiting")
    started = bool(terminated) or (isinstance(ours.get("state"), Mapping) and "running" in ours["state"])
    trouble = None if started else _init_trouble(status)
    if trouble is not None and waiting.get("reason") in (None, "PodInitializing"):
        terminated, waiting = trouble
    disruption, scheduled = _condition(status, "DisruptionTarget"), _condition(status, "PodScheduled")
    reason = bounded(status.get("reason") or terminated.get("reason") or disruption.get("reason"), REASON_LENGTH)
    said = _in_words(terminated.get("message"), terminated.get("exitCode"))
    message = bounded(status.get("message") or said or disruption.get("message"), MESSAGE_LENGTH)
    over_own_limit = reason == "Evicted" and _OWN_LIMIT_EVICTIONS.search(message) is not None
    raw = str(status.get("phase"))
    reported = PodPhase(raw) if raw in PodPhase.__members__.values() else PodPhase.PENDING
    phase = _phase(reported, ours)
    held_up = phase != reported and _others_running(status, container)
    waiting_reason = bounded(waiting.get("reason"), REASON_LENGTH)
    unplaced = scheduled.get("reason") == "Unschedulable"
    return PodState(
        name=bounded(metadata.get("name"), 253),
        uid=bounded(metadata.get("uid"), 64),
        replica=identity[0],
        attempt=identity[1],
        phase=phase,
        held_up=held_up,
        created=_parse_time(metadata.get("creationTimestamp")),
        ready=_condition(status, "Ready").get("status") == "True",
        deleting_since=_parse_time(metadata.get("deletionTimestamp")),
        no_grace_left=metadata.get("deletionGracePeriodSeconds") == 0,
        finalizers=_finalizers(metadata.get("finalizers")),
        disrupted=not over_own_limit and (disruption.get("status") == "True" or reason in DISRUPTION_REASONS),
        over_own_limit=over_own_limit,
        exit_code=_exit_code(terminated.get("exitCode")),
        started_at=_parse_time((_state(ours, "running") or _state(ours, "terminated")).get("startedAt")),
        finished_at=_parse_time(terminated.get("finishedAt")),
        reason=reason,
        message=message,
        waiting=waiting_reason + (f": {bounded(waiting.get('message'), 256)}" if waiting.get("message") else ""),
        unschedulable=bounded(scheduled.get("message"), MESSAGE_LENGTH) if unplaced else "",
        unschedulable_since=_parse_time(scheduled.get("lastTransitionTime")) if unplaced else None,
        node=bounded((pod.get("spec") or {}).get("nodeName"), 253),
        gated=TRACKING_GATE in _gates(pod.get("spec")),
        held_by=tuple(g for g in _gates(pod.get("spec")) if g != TRACKING_GATE),
        held=holds_tracking_finalizer(pod),
        in_place=(metadata.get("labels") or {}).get(IN_PLACE_LABEL) == "true",
        controller=controller_uid(pod),
        log_tail=bounded(log_tail[-LOG_TAIL_LENGTH:] if isinstance(log_tail, str) else "", LOG_TAIL_LENGTH),
    )


@dataclass(frozen=True)
class Observed:
    """Everything a reconcile reads from the cluster, read once."""

    pods: tuple[PodState, ...] = ()  # the job's own pods (its controller UID), by attempt and replica
    service_exists: bool = False
    progress: Progress | None = None  # rank 0's last report, when it could be read
    checkpoint: CheckpointStatus | None = None
    foreign: tuple[str, ...] = ()  # pods with the job's labels owned by something else, e.g. a deleted namesake
    gang: Gang | None = None  # rank 0's agent's account of the gang, when it was read (children/agent.py)
    worker_gangs: Mapping[str, Gang] = field(default_factory=dict)  # pod -> a PS worker's agent's, when read
    queue: QueueState | None = None  # a queued job's Kueue Workload, when Kueue is consulted (children/workload.py)
    spare: int = 0  # further worker pods that would fit now, looked for while an elastic job runs shrunk (kube/room.py)

    def of_attempt(self, attempt: int) -> list[PodState]:
        return [p for p in self.pods if p.attempt == attempt]

    def not_of_attempt(self, attempt: int) -> list[PodState]:
        return [p for p in self.pods if p.attempt != attempt]


Read = Callable[[Mapping[str, Any], str], PodState | None]  # one pod read: pod_state, or a memory of it


def observe(
    pods: Iterable[Mapping[str, Any]],
    container: str,
    *,
    job_uid: str,
    service: Mapping[str, Any] | None,
    read: Read = pod_state,
) -> Observed:
    """The job's own pods and Service: those whose controller is the job with this UID. `read` reads one pod
    (pod_state, or a memory of it: children/pod_memory.py)."""
    ours, foreign = [], []
    for pod in pods:
        state = read(pod, container)
        if state is None:
            continue
        if state.controller == job_uid:
            ours.append(state)
        else:
            foreign.append(state.name)
    return Observed(
        pods=tuple(sorted(ours, key=lambda s: (s.attempt, s.replica, s.name))),
        service_exists=service is not None and controller_uid(service) == job_uid,
        foreign=tuple(sorted(foreign)),
    )


def with_log_tails(observed: Observed, tails: Mapping[str, str]) -> Observed:
    """The same observation, with the last lines of the logs read for some of its pods (by name)."""
    if not tails:
        return observed
    pods = tuple(
        replace(p, log_tail=bounded(tails[p.name][-LOG_TAIL_LENGTH:], LOG_TAIL_LENGTH)) if p.name in tails else p
        for p in observed.pods
    )
    return replace(observed, pods=pods)
