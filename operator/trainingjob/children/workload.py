"""A queued job's Kueue Workload (kueue.x-k8s.io/v1beta2), pure: its name and manifest (one pod set per role, with
the count and the pod template Kueue reads the requests from), what its status says (QueueState, read once per
reconcile), where an admission places each role (the flavors' node labels and tolerations), and the patches the
job's controller writes: spec.active (false while the job is suspended, as Kueue's job frameworks deactivate a
suspended job's Workload), spec.queueName (moved while no quota is reserved), and in the status the quota
reservation released after an eviction, PodsReady, and Finished when the job ends."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from trainingjob.children.contract import ROLE_WORKER
from trainingjob.children.naming import Replica
from trainingjob.children.specs import owner_reference, pod_manifest, replicas
from trainingjob.model import TrainingJob

GROUP = "kueue.x-k8s.io"
VERSION = "v1beta2"
API_VERSION = f"{GROUP}/{VERSION}"
PRIORITY_CLASS_GROUP = "scheduling.k8s.io"
# Workload conditions, as Kueue names them.
QUOTA_RESERVED, ADMITTED, EVICTED, FINISHED, REQUEUED = "QuotaReserved", "Admitted", "Evicted", "Finished", "Requeued"
PODS_READY = "PodsReady"
# PodsReady's reasons (Kueue's job reconciler's): waiting for the pods of an admission, all of them ready, one of
# them lost after they were, and all ready again.
WAIT_FOR_START, STARTED, WAIT_FOR_RECOVERY, RECOVERED = "WaitForStart", "Started", "WaitForRecovery", "Recovered"
PODS_READY_MESSAGES = {
    WAIT_FOR_START: "Not all pods are ready or succeeded",
    STARTED: "All pods reached readiness and the workload is running",
    WAIT_FOR_RECOVERY: "At least one pod has failed, waiting for recovery",
    RECOVERED: "All pods reached readiness and the workload is running",
}
# The eviction Kueue makes of a Workload whose spec.active turned false.
DEACTIVATED = "Deactivated"
# Evictions after which Kueue expects the Requeued condition true (its job reconciler's rule).
REQUEUED_REASONS = ("Preempted", "NodeFailures")
_MESSAGE_LENGTH = 32768
Manifest = dict[str, Any]


class Act(StrEnum):
    CREATE = "create"
    DEACTIVATE = "deactivate"  # spec.active false: the job is suspended (Kueue evicts it, freeing its quota)
    ACTIVATE = "activate"  # spec.active true: the job was resumed (it queues again)
    MOVE = "move"  # spec.queueName changed to the job's, while no quota is reserved
    LEAVE = "leave"  # delete the Workload: the job no longer names a queue
    RELEASE = "release"  # clear the quota reservation after an eviction, once the pods are gone
    PODS_READY = "pods-ready"  # the PodsReady condition changed (waitForPodsReady)
    FINISH = "finish"


@dataclass(frozen=True)
class WorkloadAction:
    """The one write on a queued job's Workload a reconcile makes (plan/queue.py decides it)."""

    act: Act
    succeeded: bool = False  # FINISH: how the job ended; PODS_READY: the condition's status
    message: str = ""
    reason: str = ""  # PODS_READY: the condition's reason


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
    active: bool = True  # spec.active
    queue: str = ""  # spec.queueName
    admitted: bool = False
    reserved: bool = False  # holds a quota reservation (status.admission)
    evicted: tuple[str, str] | None = None  # (reason, message) while Evicted is true
    finished: bool = False
    cluster_queue: str | None = None
    waiting: str = ""  # Kueue's word on why it is not admitted yet (QuotaReserved's message)
    placements: Mapping[str, Placement] = field(default_factory=dict)  # by pod set (role)
    pods_ready: tuple[bool, str] | None = None  # the PodsReady condition (status, reason), when it is set


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
    by the job as its controller; `priority` is the pods' PriorityClass and its value, when they have one. An
    elastic job's workers count as its spec's replicas, however many it runs now: the quota it reserves is the
    room to grow back into, and a Workload's pod sets cannot change once it is admitted."""
    slots = replicas(job)
    firsts = {r.role: r for r in reversed(slots)}
    counts = {role: sum(1 for r in slots if r.role == role) for role in firsts}
    counts[ROLE_WORKER] = job.spec.workers.replicas
    pod_sets = [_pod_set(job, uid, firsts[role], counts[role]) for role in dict.fromkeys(r.role for r in slots)]
    spec: Manifest = {"queueName": queue, "podSets": pod_sets}
    if job.spec.run_policy.suspend:
        spec["active"] = False  # made for a suspended job: it queues once the job is resumed
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
    spec = workload.get("spec") or {}
    ready = conditions.get(PODS_READY)
    return QueueState(
        exists=True,
        active=spec.get("active") is not False,
        queue=str(spec.get("queueName") or ""),
        admitted=_true(conditions, ADMITTED),
        reserved=admission is not None or _true(conditions, QUOTA_RESERVED),
        evicted=(str(evicted.get("reason", "")), str(evicted.get("message", ""))) if evicted else None,
        finished=_true(conditions, FINISHED),
        cluster_queue=str(admission["clusterQueue"]) if admission and admission.get("clusterQueue") else None,
        waiting=str(conditions.get(QUOTA_RESERVED, {}).get("message", "")),
        placements={str(a.get("name")): _placement(a, flavors) for a in assignments},
        pods_ready=(ready.get("status") == "True", str(ready.get("reason", ""))) if ready else None,
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


def spec_patch(workload: Mapping[str, Any], **spec: Any) -> Manifest:
    """A change of the Workload's spec (active, queueName), guarded by the resourceVersion read."""
    return {"metadata": {"resourceVersion": workload["metadata"]["resourceVersion"]}, "spec": spec}


def _condition_patch(
    workload: Mapping[str, Any], kind: str, status: bool, reason: str, message: str, *, now: datetime
) -> Manifest:
    conditions = list((workload.get("status") or {}).get("conditions") or [])
    generation = workload["metadata"].get("generation")
    conditions = _with(conditions, _condition(kind, status, reason, message, now=now, generation=generation))
    return {
        "metadata": {"resourceVersion": workload["metadata"]["resourceVersion"]},
        "status": {"conditions": conditions},
    }


def pods_ready_patch(workload: Mapping[str, Any], ready: bool, reason: str, now: datetime) -> Manifest:
    """PodsReady set as Kueue's job reconciler sets it (waitForPodsReady evicts a Workload it finds false too
    long after its admission)."""
    return _condition_patch(workload, PODS_READY, ready, reason, PODS_READY_MESSAGES.get(reason, reason), now=now)


def finish_patch(workload: Mapping[str, Any], succeeded: bool, message: str, now: datetime) -> Manifest:
    """The job ended: Finished true (Succeeded or Failed), which frees the quota."""
    return _condition_patch(workload, FINISHED, True, "Succeeded" if succeeded else "Failed", message, now=now)
