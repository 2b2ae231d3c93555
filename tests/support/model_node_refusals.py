"""The model-based test's nodes that refuse pods (issue 32): a kubelet that will not admit a pod the scheduler placed
on its node (OutOfnvidia.com/gpu from a device plugin that lost its GPUs or a node whose allocatable lies,
UnexpectedAdmissionError, NodeAffinity after the node's labels changed). One rule refuses a pod now and then; another
makes every node refuse the job's pods for good, and is a liveness check: the job fails once its startup deadline
is out, counted from the first refusal the operator saw. After every reconcile: no refusal is counted as a
disruption (a job a node keeps refusing used to restart its whole gang once per refusal, up to disruptionLimit)."""

from datetime import datetime, timedelta
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule
from tests.support.builders import job_manifest
from tests.support.fake_cluster import FakeCluster
from tests.support.fake_faults import node_of
from tests.support.job_status import job_status
from tests.support.model_invariants import Ledger

from trainingjob.children.observe import controller_uid
from trainingjob.model import FailureClass, TrainingJobStatus

Manifest = dict[str, Any]
NS = "ns"
REFUSALS = (
    ("OutOfnvidia.com/gpu", "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, requested: 8"),
    ("UnexpectedAdmissionError", "Allocate failed due to no healthy devices present; requested 8, available 0"),
    ("OutOfcpu", "Pod was rejected: Node didn't have enough resource: cpu, requested: 4000, used: 60000"),
    ("NodeAffinity", "Pod was rejected: Predicate NodeAffinity failed"),
)
PASSES = 16  # the operator's passes within a startup deadline while no node admits the job's pods (at least 15 s apart)


def placed(cluster: FakeCluster, owner: str | None = None) -> list[tuple[str, str]]:
    """Pods the scheduler placed (past every gate) that no kubelet has admitted yet (of the job `owner`, if given)."""
    return sorted(
        key
        for key, pod in cluster.pods.items()
        if pod["status"].get("phase") == "Pending"
        and not pod["spec"].get("schedulingGates")
        and not pod["metadata"].get("deletionTimestamp")
        and (owner is None or controller_uid(pod) == owner)
    )


def check_refusals_uncounted(before: Manifest, after: Manifest, refused: set[str]) -> None:
    """A pass that counted one more disruption blamed no pod a node refused: a refusal is no disruption. (The pass
    may also have failed the job, e.g. at a refused pod's startup deadline: its last failure is then that one.)"""
    b, a = job_status(before), job_status(after)
    disrupted = a.last_failure is not None and a.last_failure.failure_class == FailureClass.DISRUPTION
    blamed = a.last_failure.pod_uid if a.last_failure is not None and disrupted else None
    assert a.restarts.disruption <= b.restarts.disruption or blamed not in refused, (
        f"pod {a.last_failure.pod if a.last_failure else ''}, refused by its node, counted as a disruption "
        f"(now {a.restarts.disruption})"
    )


def _running(cluster: FakeCluster, name: str) -> bool:
    """Whether a pod of job `name` runs (its node admitted it), not on its way out."""
    job = cluster.jobs.get((NS, name))
    uid = job["metadata"]["uid"] if job is not None else None
    up = [p for p in cluster.pods.values() if p["status"].get("phase") == "Running"]
    return any(controller_uid(p) == uid and not p["metadata"].get("deletionTimestamp") for p in up)


class NodeRefusalRules(RuleBasedStateMachine):
    """The rules; the machine that uses them has the cluster, the clock, the ledger and the reconcile."""

    cluster: FakeCluster
    now: datetime
    ledger: Ledger
    quieted: bool

    def __init__(self) -> None:
        super().__init__()
        self.refused: set[str] = set()  # the UIDs of the pods a node refused

    def reconcile(self, name: str, crash_after: int | None, caught_up: bool) -> None:
        raise NotImplementedError

    def calm(self, clear: bool) -> None:
        raise NotImplementedError

    def refuse(self, key: tuple[str, str], reason: str, message: str) -> None:
        """What the node's kubelet writes: the pod Failed with its reason, its containers never started."""
        pod = self.cluster.pods[key]
        pod["spec"]["nodeName"] = node_of(pod)
        waiting = [{"name": c["name"], "ready": False, "state": {"waiting": {}}} for c in pod["spec"]["containers"]]
        self.cluster.set_status(*key, phase="Failed", reason=reason, message=message, containerStatuses=waiting)
        self.ledger.disrupted(controller_uid(pod), pod["metadata"]["uid"])
        self.refused.add(pod["metadata"]["uid"])
        self.ledger.stats["pods refused by a node"] += 1

    @precondition(lambda self: bool(placed(self.cluster)))
    @rule(data=st.data(), refusal=st.sampled_from(REFUSALS))
    def node_refuses(self, data: st.DataObject, refusal: tuple[str, str]) -> None:
        """A node's kubelet will not admit a pod the scheduler placed there."""
        self.refuse(data.draw(st.sampled_from(placed(self.cluster))), *refusal)

    @precondition(lambda self: not self.quieted)
    @rule(
        name=st.sampled_from(("a", "b", "c")),
        refusal=st.sampled_from(REFUSALS),
        spec=st.fixed_dictionaries(
            {
                "workers": st.integers(1, 3),
                "mode": st.sampled_from(["DDP", "ParameterServer"]),
                "runPolicy": st.fixed_dictionaries({"startupDeadlineSeconds": st.sampled_from([30, 120, 1800])}),
            }
        ),
    )
    def no_node_admits(self, name: str, refusal: tuple[str, str], spec: Manifest) -> None:
        """From now on every node refuses the job's pods (the job is submitted first if there is none, and resumed if
        it is suspended), and nothing else goes wrong: the job fails within its startup deadline of the first
        refusal the operator saw (it may fail sooner for another deadline), and never for its disruptionLimit. Not
        for a job whose pods run already (nodes admitted them: nothing would end its wait)."""
        if _running(self.cluster, name):
            return
        self.quieted = True
        self.calm(True)
        if (NS, name) not in self.cluster.jobs:
            servers = 1 if spec["mode"] == "ParameterServer" else 0
            self.cluster.submit(job_manifest(name, namespace=NS, **spec, servers=servers))
        if (self.cluster.jobs[(NS, name)]["spec"].get("runPolicy") or {}).get("suspend"):
            self.cluster.edit_spec(NS, name, lambda job: job["runPolicy"].update(suspend=False))
        first: datetime | None = None
        start = self.now
        while True:
            job = self.cluster.jobs.get((NS, name))
            if job is None or job_status(job).phase.is_terminal or (job["spec"].get("runPolicy") or {}).get("suspend"):
                break
            limit = timedelta(seconds=(job["spec"].get("runPolicy") or {}).get("startupDeadlineSeconds", 1800))
            step = max(limit / PASSES, timedelta(seconds=15))
            slack = 2 * step  # the deadline is judged at the operator's next pass
            assert first is not None or self.now <= start + limit + slack, f"no pod of job {name} was ever placed"
            assert first is None or self.now <= first + limit + slack, (
                f"job {name}'s pods were refused for {(self.now - first).total_seconds():.0f} s, past its startup "
                f"deadline ({limit.total_seconds():.0f} s), and it is {job_status(job).phase}"
            )
            self.now += step
            self.cluster.reap_terminating()
            refused = placed(self.cluster, job["metadata"]["uid"])
            for key in refused:
                self.refuse(key, *refusal)
            self.reconcile(name, None, True)
            first = first or (self.now if refused else None)
        status = job_status(job) if job is not None else TrainingJobStatus()
        failed = next((c for c in status.conditions if c.type == "Failed" and c.status == "True"), None)
        blamed = status.last_failure.pod_uid if status.last_failure else None
        assert failed is None or failed.reason != "DisruptionLimitExceeded" or blamed not in self.refused, (
            f"job {name} failed as if refusals were disruptions: {failed.message}"
        )
        self.ledger.stats[f"refused for good: {failed.reason if failed else 'not failed'}"] += 1
