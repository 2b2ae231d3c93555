"""Queued jobs against the real Kueue manager (scripts/build-kueue.sh, testbed/kueue.py) on the cluster tier: the
operator makes each queued job's Workload, Kueue admits it within its ClusterQueue's quota, preempts a lower
priority one for a higher, and the operator suspends, releases and resumes as Kueue expects of a job framework.

What this tier cannot show is the trainer itself resuming from its checkpoint (kwok's pods run no trainer; the
node tier's suspend tests do): here rank 0's reports stand in for it, and the tests check what the operator does
with them across a preemption: the checkpoint recorded before it, the same checkpoint folder given to the attempt
after it, and the step that attempt resumed from recorded as reported."""

import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from testbed.controlplane import ControlPlane
from testbed.crds import install_crd
from testbed.harness import Harness, condition, progress_endpoint
from testbed.helm import Helm
from testbed.kueue import KueueProcess, kueue_running
from testbed.operator import OperatorProcess, operator_running
from testbed.processes import poll_until
from tests.support.chart import ChartIdentity, refusals

pytestmark = pytest.mark.cluster
Manifest = dict[str, Any]
KUEUE = ("kueue.x-k8s.io", "v1beta2")
GPU = "nvidia.com/gpu"
FLAVOR_TOLERATION = {"key": "tj-test/reserved", "operator": "Exists", "effect": "NoSchedule"}
GANG_GPUS = 8  # a job of two workers with 4 GPUs each: the ClusterQueue's whole quota


@pytest.fixture(scope="module")
def kueue(cluster: ControlPlane) -> Iterator[KueueProcess]:
    with tempfile.TemporaryDirectory(prefix="tj-kueue-") as root, kueue_running(cluster, Path(root)) as process:
        yield process


@pytest.fixture(scope="module")
def chart_operator(cluster: ControlPlane, helm: Helm, kueue: KueueProcess) -> Iterator[OperatorProcess]:
    """The operator under exactly the chart's RBAC (its ServiceAccount's token): the Kueue rules are the chart's."""
    with cluster.api_client() as api:
        install_crd(api)
    with tempfile.TemporaryDirectory(prefix="tj-kueue-rbac-") as folder:
        identity = ChartIdentity(cluster, helm, Path(folder))
        try:
            namespace = identity.namespace
            # No resync to speak of: the operator sees admissions and evictions by reading the Workloads itself.
            with operator_running(
                identity.kubeconfig,
                cluster.kubeconfig,
                TJ_OPERATOR_LEASE_NAMESPACE=namespace,
                TJ_OPERATOR_RESYNC_SECONDS="600",
            ) as op:
                yield op
        finally:
            identity.remove()


@pytest.fixture
def h(cluster: ControlPlane, cluster_ns: str, chart_operator: OperatorProcess) -> Iterator[Harness]:
    with cluster.api_client() as api:
        yield Harness(api, cluster_ns, chart_operator)
    refused = refusals(chart_operator)
    assert not refused, "\n".join(refused[:20])  # nothing the operator did for Kueue was refused by RBAC


@pytest.fixture
def queue(h: Harness, kueue: KueueProcess) -> Iterator[str]:
    """A ResourceFlavor for the GPU nodes, a ClusterQueue with quota for one gang (preempting lower priorities
    within it) and a LocalQueue in the test's namespace; the LocalQueue's name. Removed after the test."""
    custom = h.custom
    name = f"q-{h.ns}"[:63]
    flavor = {"nodeLabels": {"nvidia.com/gpu.present": "true"}, "tolerations": [FLAVOR_TOLERATION]}
    quota = {"name": name, "resources": [{"name": GPU, "nominalQuota": GANG_GPUS}]}
    cluster_queue = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": h.ns}},
        "resourceGroups": [{"coveredResources": [GPU], "flavors": [quota]}],
        "preemption": {"withinClusterQueue": "LowerPriority"},
    }
    made = [
        ("resourceflavors", _object("ResourceFlavor", name, flavor)),
        ("clusterqueues", _object("ClusterQueue", name, cluster_queue)),
    ]
    for plural, body in made:
        custom.create_cluster_custom_object(*KUEUE, plural, body)
    custom.create_namespaced_custom_object(
        *KUEUE, h.ns, "localqueues", _object("LocalQueue", name, {"clusterQueue": name})
    )
    try:
        yield name
    finally:
        for plural, body in reversed(made):
            custom.delete_cluster_custom_object(*KUEUE, plural, body["metadata"]["name"])


def _object(kind: str, name: str, spec: Manifest) -> Manifest:
    return {"apiVersion": "/".join(KUEUE), "kind": kind, "metadata": {"name": name}, "spec": spec}


def gang_job(name: str, queue: str, **spec: Any) -> Manifest:
    workers = {"replicas": 2, "resources": {"limits": {GPU: GANG_GPUS // 2}}}
    scheduling = {"queueName": queue, **spec.pop("scheduling", {})}
    body = {"mode": "DDP", "workers": workers, "trainer": {"steps": 100}, "scheduling": scheduling, **spec}
    return {"apiVersion": "trainingjob.io/v1alpha1", "kind": "TrainingJob", "metadata": {"name": name}, "spec": body}


def workload(h: Harness, job: str) -> Manifest | None:
    listed = h.custom.list_namespaced_custom_object(
        *KUEUE, h.ns, "workloads", label_selector=f"trainingjob.io/job-name={job}"
    )
    items: list[Manifest] = listed["items"]
    return items[0] if items else None


def workload_condition(found: Manifest | None, kind: str) -> str | None:
    for each in ((found or {}).get("status") or {}).get("conditions") or []:
        if each["type"] == kind:
            return str(each["status"])
    return None


def finish_gang(h: Harness, name: str, attempt: int) -> None:
    for pod in h.wait_running_pods(name, 2, attempt=attempt):
        h.finish(pod.metadata.name, 0)


def test_a_clusterqueue_with_quota_for_one_gang_admits_one_job_and_queues_the_next_until_it_ends(
    h: Harness, queue: str
) -> None:
    h.create(gang_job("first", queue, runPolicy={"startupDeadlineSeconds": 60}))
    pods = h.wait_running_pods("first", 2, attempt=1)
    assert all(p.spec.node_selector.get("nvidia.com/gpu.present") == "true" for p in pods)  # the flavor's labels
    assert all(any(t.key == FLAVOR_TOLERATION["key"] for t in p.spec.tolerations or []) for p in pods)
    first = workload(h, "first")
    assert first is not None and workload_condition(first, "Admitted") == "True"
    owner = first["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("TrainingJob", "first", True)
    assert [(s["name"], s["count"]) for s in first["spec"]["podSets"]] == [("worker", 2)]
    assert condition(h.job("first"), "Queued")["reason"] == "Admitted"

    h.create(gang_job("second", queue, runPolicy={"startupDeadlineSeconds": 5}))
    waiting = h.wait("second", lambda j: _queued_reason(j) == "WaitingForQuota", "queued for quota")
    assert waiting["status"]["phase"] == "Pending" and queue in condition(waiting, "Queued")["message"]
    held_until = time.monotonic() + 8  # past the second job's startup deadline (5 s): the wait does not count
    while time.monotonic() < held_until:
        held = h.job("second")
        assert held["status"]["phase"] == "Pending" and not h.pods("second"), held["status"]

    finish_gang(h, "first", attempt=1)
    h.wait_phase("first", "Succeeded")
    poll_until(lambda: workload_condition(workload(h, "first"), "Finished") == "True", timeout=30, what="Finished")
    h.wait_running_pods("second", 2, attempt=1, timeout=90)  # the freed quota admits the second
    assert condition(h.job("second"), "Queued")["status"] == "False"


def _queued_reason(job: Manifest) -> str | None:
    found = [c for c in (job.get("status") or {}).get("conditions", []) if c["type"] == "Queued"]
    return str(found[0]["reason"]) if found and found[0]["status"] == "True" else None


@pytest.fixture
def priorities(h: Harness) -> Iterator[tuple[str, str]]:
    """A low and a high PriorityClass for the test's pods (and so their Workloads); removed after the test."""
    scheduling = client.SchedulingV1Api(h.core.api_client)
    names = (f"low-{h.ns}"[:63], f"high-{h.ns}"[:63])
    for name, value in zip(names, (100, 1000), strict=True):
        scheduling.create_priority_class({"metadata": {"name": name}, "value": value})
    try:
        yield names
    finally:
        for name in names:
            scheduling.delete_priority_class(name)


def test_a_higher_priority_job_preempts_a_lower_one_which_resumes_from_its_checkpoint_later(
    h: Harness, queue: str, priorities: tuple[str, str]
) -> None:
    low, high = priorities
    h.create(gang_job("low", queue, scheduling={"priorityClassName": low}))
    rank0, _ = h.wait_running_pods("low", 2, attempt=1)
    report = {"step": 45, "heartbeat": time.time(), "totalSteps": 100, "lastCheckpointStep": 40,
              "lastCheckpointPath": "/checkpoints/step-40", "lastCheckpointTime": time.time()}  # fmt: skip
    with progress_endpoint(rank0.status.pod_ip, report):
        h.wait("low", lambda j: (j["status"].get("progress") or {}).get("step") == 45, "progress read")
        h.create(gang_job("high", queue, scheduling={"priorityClassName": high}))
        suspended = h.wait_phase("low", "Suspended", timeout=60)
    assert condition(suspended, "Suspended")["reason"] == "Preempted"
    assert _queued_reason(suspended) == "Preempted"
    checkpoint_dir = _env(rank0, "TJ_CHECKPOINT_DIR")
    poll_until(lambda: not h.pods("low"), timeout=30, what="the preempted job's pods to go")
    h.wait_running_pods("high", 2, attempt=1, timeout=60)  # admitted once the low job released its quota
    assert workload_condition(workload(h, "low"), "QuotaReserved") == "False"

    finish_gang(h, "high", attempt=1)
    h.wait_phase("high", "Succeeded")
    rank0, _ = h.wait_running_pods("low", 2, attempt=2, timeout=90)  # re-admitted: a new attempt
    assert _env(rank0, "TJ_CHECKPOINT_DIR") == checkpoint_dir  # the same folder, with step 40 in it
    resumed = {"step": 41, "heartbeat": time.time(), "totalSteps": 100, "resumedFromStep": 40}
    with progress_endpoint(rank0.status.pod_ip, resumed):
        job = h.wait("low", lambda j: (j["status"].get("progress") or {}).get("resumedFromStep") == 40, "resumed")
    assert job["status"]["phase"] == "Running" and condition(job, "Suspended")["status"] == "False"


def _env(pod: Any, name: str) -> str | None:
    return next((e.value for e in pod.spec.containers[0].env or [] if e.name == name), None)
