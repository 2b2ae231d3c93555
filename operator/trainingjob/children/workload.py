"""A queued job's Kueue Workload (kueue.x-k8s.io/v1beta2), pure: its name and manifest (one pod set per role, with
the count and the pod template Kueue reads the requests from), what its status says (QueueState, read once per
reconcile), where an admission places each role (the flavors' node labels and tolerations), and the status patches
the job's controller writes: the quota reservation released after an eviction, Finished when the job ends."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from trainingjob.children.naming import Replica
from trainingjob.children.specs import owner_reference, pod_manifest, replicas
from trainingjob.model import TrainingJob

GROUP = "kueue.x-k8s.io"
VERSION = "v1beta2"
API_VERSION = f"{GROUP}/{VERSION}"
PRIORITY_CLASS_GROUP = "scheduling.k8s.io"
# Workload conditions, as Kueue names them.
QUOTA_RESERVED, ADMITTED, EVICTED, FINISHED, REQUEUED = "QuotaReserved", "Admitted", "Evicted", "Finished", "Requeued"
# Evictions after which Kueue expects the Requeued condition true (its job reconciler's rule).
REQUEUED_REASONS = ("Preempted", "NodeFailures")
_MESSAGE_LENGTH = 32768
Manifest = dict[str, Any]


class Act(StrEnum):
    CREATE = "create"
    RELEASE = "release"  # clear the quota reservation after an eviction, once the pods are gone
    FINISH = "finish"


@dataclass(frozen=True)
class WorkloadAction:
    """The one write on a queued job's Workload a reconcile makes (plan/queue.py decides it)."""

    act: Act
    succeeded: bool = False
    message: str = ""


@dataclass(frozen=True)
class Placement:
    """Where an admission puts a role's pods: its flavors' node labels and tolerations."""

    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Manifest, ...] = ()


@dataclass(frozen=True)
class QueueState:
    """A queued job's Workload as read this reconcile. `served` is False when the cluster has no Kueue."""

    served: bool = True
    exists: bool = False
    admitted: bool = False
    reserved: bool = False  # holds a quota reservation (status.admission)
    evicted: tuple[str, str] | None = None  # (reason, message) while Evicted is true
    finished: bool = False
    cluster_queue: str | None = None
    waiting: str = ""  # Kueue's word on why it is not admitted yet (QuotaReserved's message)
    placements: Mapping[str, Placement] = field(default_factory=dict)  # by pod set (role)


def workload_name(job: str, uid: str) -> str:
    """One Workload per job (kept across evictions), named for the job and its UID: a namesake's is never taken."""
    return f"trainingjob-{job}"[:244] + f"-{uid[:8]}"


def _requested(container: Manifest) -> Manifest:
    """A container whose requests name what its limits name, as the apiserver defaults a pod's (Kueue counts a
    Workload's requests, and nothing defaults them in a Workload)."""
    resources = container.get("resources") or {}
    requests = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {**container, "resources": {**resources, "requests": requests}} if requests else container


def _pod_set(job: TrainingJob, uid: str, replica: Replica, count: int) -> Manifest:
    pod = pod_manifest(job, uid, replica, 1)
    spec = {k: v for k, v in pod["spec"].items() if k not in ("schedulingGates", "hostname")}
    for kind in ("containers", "initContainers"):
        if kind in spec:
            spec[kind] = [_requested(c) for c in spec[kind]]
    metadata = {k: v for k, v in pod["metadata"].items() if k in ("labels", "annotations")}
    return {"name": replica.role, "count": count, "template": {"metadata": metadata, "spec": spec}}


def workload_manifest(job: TrainingJob, uid: str, queue: str, priority: tuple[str, int] | None) -> Manifest:
    """The Workload of a queued job: one pod set per role (the first replica's pod stands for all of them), owned
    by the job as its controller; `priority` is the pods' PriorityClass and its value, when they have one."""
    slots = replicas(job)
    firsts = {r.role: r for r in reversed(slots)}
    pod_sets = [
        _pod_set(job, uid, firsts[role], sum(1 for r in slots if r.role == role))
        for role in dict.fromkeys(r.role for r in slots)
    ]
    spec: Manifest = {"queueName": queue, "podSets": pod_sets}
    if priority is not None:
        name, value = priority
        spec |= {"priorityClassRef": {"group": PRIORITY_CLASS_GROUP, "kind": "PriorityClass", "name": name}}
        spec["priority"] = value
    return {
        "apiVersion": API_VERSION,
        "kind": "Workload",
        "metadata": {
            "name": workload_name(str(job.metadata.name), uid),
            "namespace": job.metadata.namespace,
            "labels": {"trainingjob.io/job-name": str(job.metadata.name)},
            "ownerReferences": [owner_reference(job, uid)],
        },
        "spec": spec,
    }


def _conditions(workload: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {str(c.get("type")): c for c in (workload.get("status") or {}).get("conditions") or []}


def _true(conditions: Mapping[str, Mapping[str, Any]], kind: str) -> bool:
    return conditions.get(kind, {}).get("status") == "True"


def flavor_names(workload: Mapping[str, Any]) -> list[str]:
    """The ResourceFlavors the Workload's admission assigns, each once."""
    admission = (workload.get("status") or {}).get("admission") or {}
    names = [f for a in admission.get("podSetAssignments") or [] for f in (a.get("flavors") or {}).values()]
    return list(dict.fromkeys(str(n) for n in names))


def _placement(assignment: Mapping[str, Any], flavors: Mapping[str, Mapping[str, Any]]) -> Placement:
    selector: dict[str, str] = {}
    tolerations: list[Manifest] = []
    for name in dict.fromkeys((assignment.get("flavors") or {}).values()):
        spec = (flavors.get(str(name)) or {}).get("spec") or {}
        selector |= spec.get("nodeLabels") or {}
        tolerations += [t for t in spec.get("tolerations") or [] if t not in tolerations]
    return Placement(selector, tuple(tolerations))


def queue_state(workload: Mapping[str, Any] | None, flavors: Mapping[str, Mapping[str, Any]]) -> QueueState:
    """What the Workload says, with each pod set's placement from the ResourceFlavors its admission names."""
    if workload is None:
        return QueueState()
    conditions = _conditions(workload)
    admission = (workload.get("status") or {}).get("admission") or None
    evicted = conditions.get(EVICTED) if _true(conditions, EVICTED) else None
    assignments = (admission or {}).get("podSetAssignments") or []
    return QueueState(
        exists=True,
        admitted=_true(conditions, ADMITTED),
        reserved=admission is not None or _true(conditions, QUOTA_RESERVED),
        evicted=(str(evicted.get("reason", "")), str(evicted.get("message", ""))) if evicted else None,
        finished=_true(conditions, FINISHED),
        cluster_queue=str(admission["clusterQueue"]) if admission and admission.get("clusterQueue") else None,
        waiting=str(conditions.get(QUOTA_RESERVED, {}).get("message", "")),
        placements={str(a.get("name")): _placement(a, flavors) for a in assignments},
    )


def _condition(kind: str, status: bool, reason: str, message: str, *, now: datetime, generation: Any) -> Manifest:
    return {
        "type": kind,
        "status": "True" if status else "False",
        "reason": reason,
        "message": message[:_MESSAGE_LENGTH],
        "lastTransitionTime": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "observedGeneration": generation or 0,
    }


def _with(conditions: Sequence[Manifest], new: Manifest) -> list[Manifest]:
    """`conditions` with `new` set; its transition time kept when its status did not change."""
    old = next((c for c in conditions if c.get("type") == new["type"]), None)
    if old is not None and old.get("status") == new["status"]:
        new = new | {"lastTransitionTime": old.get("lastTransitionTime", new["lastTransitionTime"])}
    return [c for c in conditions if c.get("type") != new["type"]] + [new]


def release_patch(workload: Mapping[str, Any], now: datetime) -> Manifest:
    """After an eviction, once the job's pods are gone: the quota reservation cleared (status.admission null,
    QuotaReserved and Admitted false) and Requeued set, as Kueue's own job reconciler does. A merge patch that
    carries the resourceVersion read, so a Workload changed meanwhile is not overwritten."""
    conditions = list((workload.get("status") or {}).get("conditions") or [])
    evicted = _conditions(workload).get(EVICTED, {})
    reason, message = str(evicted.get("reason") or "Evicted"), str(evicted.get("message") or "")
    generation = workload["metadata"].get("generation")
    conditions = _with(
        conditions, _condition(REQUEUED, reason in REQUEUED_REASONS, reason, message, now=now, generation=generation)
    )
    conditions = _with(
        conditions, _condition(QUOTA_RESERVED, False, "Pending", message, now=now, generation=generation)
    )
    admitted = "The workload has no reservation"
    conditions = _with(
        conditions, _condition(ADMITTED, False, "NoReservation", admitted, now=now, generation=generation)
    )
    return {
        "metadata": {"resourceVersion": workload["metadata"]["resourceVersion"]},
        "status": {"admission": None, "conditions": conditions},
    }


def finish_patch(workload: Mapping[str, Any], succeeded: bool, message: str, now: datetime) -> Manifest:
    """The job ended: Finished true (Succeeded or Failed), which frees the quota."""
    conditions = list((workload.get("status") or {}).get("conditions") or [])
    reason = "Succeeded" if succeeded else "Failed"
    generation = workload["metadata"].get("generation")
    conditions = _with(conditions, _condition(FINISHED, True, reason, message, now=now, generation=generation))
    return {
        "metadata": {"resourceVersion": workload["metadata"]["resourceVersion"]},
        "status": {"conditions": conditions},
    }
