"""An in-memory reconcile.Cluster with the apiserver semantics the operator depends on: UIDs, resourceVersions
(a stale status write is a Conflict, a write to a deleted job is Gone), JSON merge patches checked against
the status schema, graceful deletion (a deletionTimestamp, then gone when the test's kubelet says so), deletes
guarded by UID (and resourceVersion) preconditions, a pod create of a name that exists answered as done,
controller owner references and garbage collection, refused creations of any kind, finalizers that keep a pod
terminating, crashes at any operation, and (tests/support/fake_faults.py) 429/5xx answers, lost answers, injected
sidecars, foreign scheduling gates and skewed node clocks. Every write of the operator's bumps a cluster-wide
resourceVersion and passes the object as written to `on_written`, as the apiserver's answer reaches the operator's
stores (unless the answer was lost); `acted` records what each delete, release, ungate and order reached (its UID
then)."""

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

from tests.support.fake_faults import (
    ApiFaults,
    Nodes,
    ended_containers,
    has_sidecar,
    missing_secrets,
    node_of,
    running_containers,
)
from tests.support.fake_watch import clone

from trainingjob.children.agent import Gang, GangState
from trainingjob.children.naming import ATTEMPT_LABEL, CONTAINER_NAME, JOB_LABEL, TRACKING_FINALIZER, TRACKING_GATE
from trainingjob.children.observe import controller_uid
from trainingjob.children.progress_report import Report
from trainingjob.kube.ports import Conflict, Created, Gone
from trainingjob.local.cluster import merge_patched
from trainingjob.model import TrainingJobStatus
from trainingjob.plan import Event
from trainingjob.plan.waves import Refusal

Manifest = dict[str, Any]
GRACE_SECONDS = 30


class Crash(Exception):  # noqa: N818
    """The operator died here: whatever came before this operation happened, nothing after it did."""


class InvalidStatus(Exception):  # noqa: N818
    """The apiserver's 422: the written status does not match the CRD's schema."""


K = TypeVar("K")


@dataclass
class FakeCluster:
    clock: Callable[[], datetime]
    jobs: dict[tuple[str, str], Manifest] = field(default_factory=dict)
    pods: dict[tuple[str, str], Manifest] = field(default_factory=dict)
    services: dict[tuple[str, str], Manifest] = field(default_factory=dict)
    others: dict[tuple[str, str, str], Manifest] = field(default_factory=dict)  # Secrets, NetworkPolicies
    events: list[tuple[str, Event]] = field(default_factory=list)
    # when each of `events` came, its job's UID, the job's restarts and generation then (a new failure, or a change
    # of the spec, is a new cause), and the operator process that wrote it (`emitter` then)
    event_log: list[tuple[datetime, str, str, str]] = field(default_factory=list)
    emitter: str = "operator"
    reports: dict[str, Report] = field(default_factory=dict)  # pod name -> what its progress endpoint answers
    gangs: dict[str, Gang] = field(default_factory=dict)  # rank 0's pod -> what its agent answers of the gang
    orders: list[tuple[str, int]] = field(default_factory=list)  # (rank 0's pod, attempt) the agents were told
    checkpoint_asks: list[tuple[str, int, int]] = field(default_factory=list)  # (rank 0's pod, attempt, after step)
    room: int = 0  # further worker pods the nodes have room for (spare): capacity regained for shrunk elastic jobs
    order_pacing: dict[int, str | None] = field(default_factory=dict)  # attempt -> its order's TJ_CHECKPOINT_PACING
    refuse: Callable[[Manifest], Refusal | None] = lambda _: None  # pods
    refuse_other: Callable[[Manifest], Refusal | None] = lambda _: None  # the Service, key Secret, NetworkPolicy
    faults: ApiFaults = field(default_factory=ApiFaults)
    nodes: Nodes = field(default_factory=Nodes)
    acted: list[tuple[str, str, str]] = field(default_factory=list)  # (what, name, the UID it reached or "")
    operations_left: int | None = None  # crash when this many operations have run
    status_writes: int = 0  # status writes the apiserver took, and create calls (waves) it answered, so far
    create_calls: int = 0
    on_written: Callable[[Manifest], None] = lambda _: None
    watches: list[Callable[[], None]] = field(default_factory=list)  # each watch's record(), run on every write
    born: dict[str, str] = field(default_factory=dict)  # every pod ever made: UID -> its attempt label
    named: dict[tuple[str, str], str] = field(default_factory=dict)  # (namespace, name) -> the UID made last
    _ids: Iterator[int] = field(default_factory=itertools.count)
    _versions: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    # -- fault injection ---------------------------------------------------------------------------------

    def _operation(self) -> None:
        if self.operations_left is not None:
            if self.operations_left <= 0:
                raise Crash("the operator was killed")
            self.operations_left -= 1
        self.faults.before()

    def _next(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids)}"

    def _watched(self) -> None:
        """Every watch records a write as it happens, so an object the operator writes and someone else then
        removes before the watch looks again still reaches the stores as added, then deleted (a real watch
        misses no event)."""
        for record in self.watches:
            record()

    def version(self) -> str:
        """The next resourceVersion: one counter for every object, as etcd's revision."""
        return str(next(self._versions))

    def _written(self, manifest: Manifest) -> None:
        manifest["metadata"]["resourceVersion"] = self.version()
        self._watched()
        if not self.faults.losing:
            self.on_written(clone(manifest))

    # -- the Cluster protocol ------------------------------------------------------------------------------

    def read_job(self, namespace: str, name: str) -> Manifest | None:
        found = self.jobs.get((namespace, name))
        return clone(found) if found else None

    def list_pods(self, namespace: str, job: str) -> list[Manifest]:
        return [
            clone(p)
            for (ns, _), p in sorted(self.pods.items())
            if ns == namespace and p["metadata"]["labels"].get(JOB_LABEL) == job
        ]

    def read_service(self, namespace: str, job: str) -> Manifest | None:
        found = self.services.get((namespace, job))
        return clone(found) if found else None

    def log_tail(self, namespace: str, pod: str, lines: int) -> str:
        return f"last words of {pod}"

    def progress(self, pod: Manifest) -> Report:
        return self.reports.get(pod["metadata"]["name"], (None, None))

    def departed(self, namespace: str, pod: str) -> tuple[str, Report] | None:
        return None

    def gang(self, pod: Manifest) -> Gang | None:
        return self.gangs.get(pod["metadata"]["name"])

    def order(self, pod: Manifest, job_uid: str, attempt: int, pacing: str | None = None) -> bool:
        """Rank 0's agent takes the order: a later attempt starts (its pods' agents report in as they run it)."""
        self._operation()
        name = pod["metadata"]["name"]
        self._acted("order", pod["metadata"].get("namespace", ""), name)
        self.orders.append((name, attempt))
        self.order_pacing[attempt] = pacing
        known = self.gangs.get(name)
        if known is None:
            self.faults.answer()
            return False
        if attempt > known.attempt:
            self.gangs[name] = Gang(attempt, GangState.STARTING, known.pods, 0)
            found = next((p for (_, n), p in self.pods.items() if n == name), {})
            if found and found["status"].get("phase") == "Running":
                found["status"]["conditions"] = [{"type": "Ready", "status": "True"}]  # its readiness probe
        self.faults.answer()
        return True

    def ask_checkpoint(self, pod: Manifest, job_uid: str, attempt: int, after_step: int) -> bool:
        """Rank 0's agent takes the ask (recorded: the model's trainer checkpoints on its own schedule)."""
        self._operation()
        self.checkpoint_asks.append((pod["metadata"]["name"], attempt, after_step))
        return pod["metadata"]["name"] in self.gangs

    def spare(self, pod: Manifest, at_most: int) -> int:
        """The Room port (kube/room.py): how many more pods like `pod` the nodes have room for, at most `at_most`."""
        return max(min(self.room, at_most), 0)

    def write_status(self, namespace: str, name: str, resource_version: str, patch: Manifest) -> str:
        self._operation()
        job = self.jobs.get((namespace, name))
        if job is None:
            raise Gone(name)
        if job["metadata"]["resourceVersion"] != resource_version:
            raise Conflict(name)
        status = merge_patched(job.get("status") or {}, clone(patch))
        try:
            TrainingJobStatus.model_validate(status)
        except ValueError as error:
            raise InvalidStatus(f"{namespace}/{name}: {error}") from error
        job["status"] = status
        self.status_writes += 1
        self._written(job)
        self.faults.answer()
        return str(job["metadata"]["resourceVersion"])

    def create(self, namespace: str, manifests: Sequence[Manifest]) -> Created:
        """As kube.job_cluster does: the others first, and no pod while the job's NetworkPolicy is refused."""
        self.create_calls += 1
        pods: dict[str, str] = {}
        refusals: list[Refusal] = []
        for manifest in manifests:
            if manifest["kind"] == "Pod" and any(r.name in self._policies(manifests) for r in refusals):
                break
            self._operation()
            done = self._create_one(namespace, manifest)
            self.faults.answer()
            if isinstance(done, Refusal):
                refusals.append(done)
            elif done:
                pods[manifest["metadata"]["name"]] = done
        return Created(pods, refusals)

    @staticmethod
    def _policies(manifests: Sequence[Manifest]) -> set[str]:
        return {m["metadata"]["name"] for m in manifests if m["kind"] == "NetworkPolicy"}

    def _create_one(self, namespace: str, manifest: Manifest) -> Refusal | str:
        """A pod's UID, "" for anything else created (or already there), or the apiserver's refusal."""
        name = manifest["metadata"]["name"]
        if manifest["kind"] != "Pod":
            refused = self.refuse_other(manifest)
            if refused is not None:
                return refused
            if manifest["kind"] == "Service" and (namespace, name) not in self.services:
                self.services[(namespace, name)] = service = clone(manifest)
                service["metadata"].update(namespace=namespace, uid=self._next("service"))
                self._written(service)
            elif manifest["kind"] != "Service":  # the key Secret and the NetworkPolicy: nothing observes them
                self.others.setdefault((namespace, manifest["kind"], name), clone(manifest))
            return ""
        refusal = self.refuse(manifest)
        if refusal is not None:
            return refusal
        if (namespace, name) in self.pods:
            return ""  # 409 AlreadyExists: not a refusal, a pod the next pass sees
        uid = self.add_pod(namespace, manifest)
        self.acted.append(("create", name, uid))
        self._watched()
        if not self.faults.losing:
            self.on_written(clone(self.pods[(namespace, name)]))
        return uid

    def delete_pods(self, namespace: str, pods: Mapping[str, str], *, force: bool = False) -> None:
        for name, uid in pods.items():
            self._operation()
            pod = self.pods.get((namespace, name))
            if pod is not None and pod["metadata"]["uid"] != uid:
                self.faults.answer()
                continue  # 409: the precondition on its UID failed
            self._acted("delete", namespace, name)
            self.delete_pod(namespace, name, force=force)
            if pod is not None:
                pod["metadata"].setdefault("deletionTimestamp", self.clock().isoformat())
                self._written(pod)
            self.faults.answer()

    def release_pods(self, namespace: str, pods: Mapping[str, str]) -> None:
        """Each pod of that UID loses the tracking finalizer; one the kubelet is done with then goes."""
        for name, uid in pods.items():
            self._operation()
            pod = self.pods.get((namespace, name))
            if pod is None or pod["metadata"]["uid"] != uid:
                self.faults.answer()
                continue  # 404, or 422: the patch names the UID it was decided on
            self._acted("release", namespace, name)
            held = [f for f in pod["metadata"].get("finalizers") or [] if f != TRACKING_FINALIZER]
            pod["metadata"]["finalizers"] = held
            if self._done_with(pod):
                del self.pods[(namespace, name)]
                self._watched()
            else:
                self._written(pod)
            self.faults.answer()

    @staticmethod
    def _done_with(pod: Manifest) -> bool:
        """A deleted pod without finalizers whose grace period is over (its kubelet confirmed, or it was forced)."""
        metadata = pod["metadata"]
        return (
            bool(metadata.get("deletionTimestamp"))
            and not metadata.get("finalizers")
            and (metadata.get("deletionGracePeriodSeconds") == 0)
        )

    def ungate(self, namespace: str, pods: Mapping[str, str]) -> None:
        for name, uid in pods.items():
            self._operation()
            pod = self.pods.get((namespace, name))
            if pod is not None and pod["metadata"]["uid"] != uid:
                continue  # 422: the patch names the UID it was decided on
            self._acted("ungate", namespace, name)
            if pod is not None:
                gates = [g for g in pod["spec"].get("schedulingGates", []) if g["name"] != TRACKING_GATE]
                pod["spec"]["schedulingGates"] = gates
                self._written(pod)
            self.faults.answer()

    def _acted(self, what: str, namespace: str, name: str) -> None:
        """What a write reached: the UID of the object of that name now (the job's for "delete job")."""
        found = (self.jobs if what == "delete job" else self.pods).get((namespace, name))
        self.acted.append((what, name, found["metadata"]["uid"] if found else ""))

    def delete_job(self, namespace: str, name: str, uid: str, resource_version: str | None = None) -> None:
        self._operation()
        found = (self.jobs.get((namespace, name)) or {}).get("metadata", {})
        if found and found["uid"] == uid and resource_version in (None, found["resourceVersion"]):
            self._acted("delete job", namespace, name)
            del self.jobs[(namespace, name)]  # else 409: a precondition failed
        self.faults.answer()

    def emit(self, job: Manifest, events: Sequence[Event]) -> None:
        self._operation()
        self.events.extend((job["metadata"]["name"], e) for e in events)
        now = self.jobs.get((job["metadata"].get("namespace", ""), job["metadata"]["name"])) or job
        restarts = f"{(now.get('status') or {}).get('restarts')} {now['metadata'].get('generation')}"
        self.event_log.extend((self.clock(), job["metadata"].get("uid", ""), restarts, self.emitter) for _ in events)
        self.faults.answer()

    # -- what users, kubelets and controllers do -----------------------------------------------------------

    def submit(self, manifest: Manifest) -> Manifest:
        """Create a job as the apiserver would: a fresh UID, generation 1."""
        job = clone(manifest)
        job["metadata"].update(uid=self._next("job"), resourceVersion=self.version(), generation=1)
        job.pop("status", None)
        self.jobs[(job["metadata"]["namespace"], job["metadata"]["name"])] = job
        return job

    def edit_spec(self, namespace: str, name: str, change: Callable[[Manifest], None]) -> None:
        job = self.jobs[(namespace, name)]
        change(job["spec"])
        job["metadata"]["generation"] += 1
        job["metadata"]["resourceVersion"] = self.version()

    def add_pod(self, namespace: str, manifest: Manifest) -> str:
        pod = clone(manifest)
        uid = self._next("pod")
        pod["metadata"].update(
            namespace=namespace, uid=uid, creationTimestamp=self.clock().isoformat(), resourceVersion=self.version()
        )
        pod["status"] = {"phase": "Pending"}
        self.born[uid] = str((pod["metadata"].get("labels") or {}).get(ATTEMPT_LABEL, ""))
        self.named[(namespace, pod["metadata"]["name"])] = uid
        self.nodes.admit(pod)
        self.pods[(namespace, pod["metadata"]["name"])] = pod
        return uid

    def delete_pod(self, namespace: str, name: str, *, force: bool = False) -> None:
        """A graceful deletion, or a forced one (gone at once, unless a finalizer holds it)."""
        pod = self.pods.get((namespace, name))
        if pod is None:
            return
        if force and not pod["metadata"].get("finalizers"):
            del self.pods[(namespace, name)]
        elif force:  # the apiserver shortens the grace period of a pod its finalizers keep: none is left, and
            # its deletionTimestamp moves back by the grace it had (to when its deletion was first asked for)
            metadata = pod["metadata"]
            had, grace = metadata.get("deletionTimestamp"), metadata.get("deletionGracePeriodSeconds", 0)
            asked = datetime.fromisoformat(had) - timedelta(seconds=grace) if had else self.clock()
            metadata["deletionTimestamp"] = asked.isoformat()
            metadata["deletionGracePeriodSeconds"] = 0
            self.touch(namespace, name)
        else:
            pod["metadata"].setdefault(
                "deletionTimestamp", (self.clock() + timedelta(seconds=GRACE_SECONDS)).isoformat()
            )
            pod["metadata"].setdefault("deletionGracePeriodSeconds", GRACE_SECONDS)
            self.touch(namespace, name)

    def set_status(self, namespace: str, name: str, **status: Any) -> None:
        self.pods[(namespace, name)]["status"].update(clone(status))
        self.touch(namespace, name)

    def touch(self, namespace: str, name: str) -> None:
        """A kubelet's or a controller's write: the pod's next resourceVersion, so that the watch delivers it even
        when it has not yet recorded the pod's creation."""
        self.pods[(namespace, name)]["metadata"]["resourceVersion"] = self.version()

    def is_gated(self, namespace: str, name: str) -> bool:
        """Held by a scheduling gate: never scheduled, so no kubelet can run, fail or evict it."""
        return bool(self.pods[(namespace, name)]["spec"].get("schedulingGates"))

    def run(self, namespace: str, name: str) -> None:
        """The kubelet starts the pod's containers (but not while a Secret it mounts is missing)."""
        pod = self.pods[(namespace, name)]
        secrets = {n for (ns, kind, n) in self.others if (ns, kind) == (namespace, "Secret")}
        missing = missing_secrets(pod, secrets)
        if missing:
            why = {"reason": "CreateContainerConfigError", "message": f'secret "{missing[0]}" not found'}
            self.set_status(namespace, name, containerStatuses=[{"name": CONTAINER_NAME, "state": {"waiting": why}}])
            return
        node = node_of(pod)
        pod["spec"]["nodeName"] = node
        self.set_status(namespace, name, phase="Running", conditions=[{"type": "Ready", "status": "True"}])
        if has_sidecar(pod):
            started = self.nodes.clock(node, self.clock()).isoformat()
            self.set_status(namespace, name, containerStatuses=running_containers(pod, started))

    def finish(self, namespace: str, name: str, exit_code: int, reason: str = "") -> None:
        """The trainer exits; an injected sidecar keeps the pod Running (until fake_faults.sidecar_ends)."""
        reason = reason or ("Completed" if exit_code == 0 else "Error")
        pod = self.pods[(namespace, name)]
        ended = self.nodes.clock(node_of(pod), self.clock()).isoformat()
        terminated = {"exitCode": exit_code, "reason": reason, "finishedAt": ended}
        self.set_status(
            namespace,
            name,
            phase="Running" if has_sidecar(pod) else "Succeeded" if exit_code == 0 else "Failed",
            conditions=[{"type": "Ready", "status": "False"}],
            containerStatuses=ended_containers(pod, terminated, sidecar_runs=True),
        )

    def release(self, namespace: str, name: str) -> None:
        """The foreign controller removes its finalizer: a pod being deleted goes, unless the operator's tracking
        finalizer still holds it."""
        pod = self.pods[(namespace, name)]
        held = [f for f in pod["metadata"].pop("finalizers", None) or [] if f == TRACKING_FINALIZER]
        if held:
            pod["metadata"]["finalizers"] = held
        if pod["metadata"].get("deletionTimestamp") and not held:
            del self.pods[(namespace, name)]
        else:
            self.touch(namespace, name)

    def evict(self, namespace: str, name: str, reason: str = "EvictionByEvictionAPI") -> None:
        """The Eviction API (or preemption): DisruptionTarget, then a graceful deletion."""
        condition = {"type": "DisruptionTarget", "status": "True", "reason": reason, "message": "evicted"}
        pod = self.pods[(namespace, name)]
        pod["status"]["conditions"] = [*pod["status"].get("conditions", []), condition]
        self.delete_pod(namespace, name)

    def kubelet_evict(self, namespace: str, name: str, message: str) -> None:
        """The kubelet's eviction: Failed with reason Evicted and its message."""
        self.set_status(namespace, name, phase="Failed", reason="Evicted", message=message)

    def reap(self, namespace: str, name: str) -> None:
        """The kubelet finished a graceful deletion (or the pod GC removed a pod of a lost node): the pod goes,
        unless a finalizer holds it."""
        pod = self.pods.get((namespace, name))
        if pod is not None and not pod["metadata"].get("finalizers"):
            del self.pods[(namespace, name)]
        elif pod is not None and pod["metadata"].get("deletionTimestamp"):
            self._confirmed(namespace, name)

    def _confirmed(self, namespace: str, name: str) -> None:
        """The kubelet is done with a pod a finalizer holds: no grace is left, it goes with its last finalizer."""
        if self.pods[(namespace, name)]["metadata"].get("deletionGracePeriodSeconds") != 0:
            self.pods[(namespace, name)]["metadata"]["deletionGracePeriodSeconds"] = 0
            self.touch(namespace, name)

    def reap_terminating(self) -> None:
        """Every graceful deletion finishes (but for pods a finalizer holds)."""
        for key, pod in list(self.pods.items()):
            if pod["metadata"].get("deletionTimestamp"):
                self.reap(*key)

    def collect_garbage(self) -> None:
        """The garbage collector: children whose controller no longer exists go (a pod a finalizer holds is
        deleted, and stays until its finalizers are removed)."""
        alive = {job["metadata"]["uid"] for job in self.jobs.values()}
        for key, pod in list(self.pods.items()):
            held, deleting = pod["metadata"].get("finalizers"), pod["metadata"].get("deletionTimestamp")
            if controller_uid(pod) not in ("", *alive) and held and not deleting:
                self.delete_pod(*key)
        _drop_orphans(self.pods, alive)
        _drop_orphans(self.services, alive)
        _drop_orphans(self.others, alive)

    def job_status(self, namespace: str, name: str) -> Mapping[str, Any]:
        return self.jobs[(namespace, name)].get("status") or {}


def _drop_orphans(store: dict[K, Manifest], alive: set[str]) -> None:
    orphaned = [key for key, child in store.items() if controller_uid(child) not in ("", *alive)]
    for key in [key for key in orphaned if not store[key]["metadata"].get("finalizers")]:
        del store[key]
