"""The model-based test's elastic jobs (issue 34): DDP jobs whose workers.minReplicas is below replicas, capacity lost
(the scheduler finds no room for some of a gang's workers) and regained (the nodes have room for more:
FakeCluster.room, what kube/room.py finds) at any moment, the operator killed at any point as everywhere else.

After every reconcile: a job runs with between minReplicas and replicas workers, and its current attempt has no
worker pod beyond that size; a resize counts no restart, blames no pod and is a Resized Event; a job grows only once
a checkpoint newer than the one it noted when it saw room is reported (a restart at a checkpoint, never mid-step).
Over time: once the cluster is quiet with room again, a shrunk job grows back to every replica
(model_liveness.unsettled asks for all of them while the nodes have room)."""

from datetime import datetime
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule
from tests.support.fake_cluster import FakeCluster
from tests.support.job_status import job_status
from tests.support.model_invariants import Ledger, check_cluster, resized, workers_now

from trainingjob.children.contract import ROLE_WORKER
from trainingjob.children.naming import CONTAINER_NAME
from trainingjob.children.observe import PodPhase, controller_uid, pod_state

Manifest = dict[str, Any]
NS = "ns"
RESIZED = "Resized"
UNSCHEDULABLE = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
GROWING = (600, 5, 5)  # seconds between passes: past the resize interval (room seen), grown at a newer checkpoint


CHECKPOINTS = {"volume": {"persistentVolumeClaim": {"claimName": "checkpoints"}}, "everySteps": 100}


@st.composite
def elastic_workers(draw: st.DrawFn, replicas: int) -> Manifest:
    """spec.workers (and checkpoints, which an elastic DDP job grows at): `replicas`, elastic (a minReplicas
    below it) about half the time it can be."""
    if replicas < 2 or not draw(st.booleans()):
        return {"workers": replicas}
    workers = {"replicas": replicas, "minReplicas": draw(st.integers(1, replicas - 1))}
    return {"workers": workers, "checkpoint": CHECKPOINTS} if draw(st.booleans()) else {"workers": workers}


def _sizes(job: Manifest) -> tuple[int, int]:
    """spec.workers' replicas and minReplicas (replicas when unset)."""
    workers = job["spec"]["workers"]
    return int(workers["replicas"]), int(workers.get("minReplicas", workers["replicas"]))


def check_resize(
    ledger: Ledger, before: Manifest, after: Manifest, events: list[str] | None, cluster: FakeCluster
) -> None:
    """A pass's resize (or none) against the job's sizes, its counts and its checkpoints; the current attempt's
    worker pods within its size. `events`: the reasons of the Events the pass wrote (None when it was cut short)."""
    b, a = job_status(before), job_status(after)
    desired, fewest = _sizes(after)
    if a.scale is not None and after["spec"].get("mode", "DDP") == "DDP":
        assert fewest <= a.scale.current <= desired or a.scale.current == desired, a.scale
    if resized(b, a):
        assert events is None or RESIZED in events, "a resize without its Resized Event"
        assert a.attempt == b.attempt + 1, f"a resize moved the attempt from {b.attempt} to {a.attempt}"
        assert a.restarts == b.restarts, f"a resize counted as a restart: {b.restarts} -> {a.restarts}"
        assert a.last_failure == b.last_failure, "a resize blamed a pod"
        grew = a.scale is not None and b.scale is not None and a.scale.current > b.scale.current
        ledger.stats["elastic jobs grown" if grew else "elastic jobs shrunk"] += 1
        if grew:
            noted = b.scale.grow_after_step if b.scale is not None else None
            newest = a.last_checkpoint.step if a.last_checkpoint is not None else None
            assert noted is not None and newest is not None and newest > noted, (
                f"grew at checkpoint {newest}, not past {noted}, the newest when room was seen"
            )
    size = workers_now(after)
    uid = after["metadata"]["uid"]
    beyond = [
        p["metadata"]["name"]
        for p in cluster.pods.values()
        if controller_uid(p) == uid
        and (s := pod_state(p, CONTAINER_NAME)) is not None
        and s.attempt == a.current_pods_attempt
        and s.replica.role == ROLE_WORKER
        and s.replica.index >= size
    ]
    assert not beyond, f"worker pods {beyond} beyond the attempt's {size} workers"


def wanted_workers(job: Manifest, room: int) -> int:
    """How many workers a settled job runs: every replica while the nodes have room for the missing ones (and it
    has checkpoints to grow at), else the size it runs with (status.scale.current)."""
    desired, current = _sizes(job)[0], workers_now(job)
    grows = room >= desired - current and "checkpoint" in job["spec"]  # a job grows at a checkpoint
    return desired if grows else current


class ElasticRules(RuleBasedStateMachine):
    """The rules; the machine that uses them has the cluster, the clock, the ledger and the operator's passes."""

    cluster: FakeCluster
    now: datetime
    ledger: Ledger

    def operator_pass(self, seconds: int) -> None:
        raise NotImplementedError

    def submit(self, name: str, spec: Manifest) -> None:
        raise NotImplementedError

    @rule(
        name=st.sampled_from(("a", "b", "c")),
        fewest=st.sampled_from([1, 2]),
        placed=st.sampled_from([2, 1, 0]),
        seconds=st.sampled_from([130, 600, 60]),
        back=st.booleans(),
    )
    def capacity_lost(self, name: str, fewest: int, placed: int, seconds: int, back: bool) -> None:
        """The nodes have room for only `placed` of the job's pending workers (its pods created, in waves; an
        elastic job of 3 workers, at least `fewest`, submitted first if there is none): they run, the scheduler
        calls the others unschedulable; `seconds` pass (past resizeWaitSeconds, or not), the operator passing;
        then the room comes `back` at once, or not (capacity_returns may bring it later)."""
        if (NS, name) not in self.cluster.jobs:
            workers = {"replicas": 3, "minReplicas": fewest}
            self.submit(name, {"workers": workers, "checkpoint": CHECKPOINTS, "runPolicy": {"backoffLimit": 3}})
        self.cluster.room = 0
        for _ in range(2):  # the gang's pods, created in waves (of 1, then 2)
            self.operator_pass(1)
        job = self.cluster.jobs.get((NS, name))
        if job is None:
            return
        attempt = job_status(job).current_pods_attempt
        for key, pod in sorted(self.cluster.pods.items()):
            state = pod_state(pod, CONTAINER_NAME)
            if controller_uid(pod) != job["metadata"]["uid"] or state is None or state.attempt != attempt:
                continue
            if state.phase != PodPhase.PENDING or state.deleting or self.cluster.is_gated(*key):
                continue
            if state.replica.role == ROLE_WORKER and state.replica.index >= placed:
                scheduled = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
                self.cluster.set_status(*key, conditions=[scheduled | {"message": UNSCHEDULABLE}])
            else:
                self.cluster.run(*key)
        self.ledger.stats["capacity lost"] += 1
        check_cluster(self.ledger, self.cluster)  # as after every rule: the ledger learns of the attempt's pods
        self.operator_pass(seconds)
        if back:
            self.capacity_returns(name, 3)

    @rule(name=st.sampled_from(("a", "b", "c")), room=st.sampled_from([3, 1]))
    def capacity_returns(self, name: str, room: int) -> None:
        """The nodes have room for `room` more workers (a node back, GPUs freed), and time goes on past the
        resize interval, the job's rank 0 reporting ever newer checkpoints, its pods running, the operator passing:
        a shrunk job with checkpoints grows back when room for all its missing workers is there."""
        self.cluster.room = room
        for index, seconds in enumerate(GROWING):
            self.kubelets_settle()
            check_cluster(self.ledger, self.cluster)  # as after every rule: the ledger learns of the attempt's pods
            self.progress(name, True, b"", 1000 + 100 * index)  # past any step the random reports give
            self.operator_pass(seconds)

    def kubelets_settle(self) -> None:
        raise NotImplementedError

    def progress(self, name: str, good: bool, body: bytes, step: int) -> None:
        raise NotImplementedError
