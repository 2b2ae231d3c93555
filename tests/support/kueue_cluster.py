"""The Kueue tests' shared parts (test_kueue.py, test_kueue_pods_ready.py; each module runs its own Kueue, its
`kueue` fixture): the operator under the chart's RBAC, a harness that checks RBAC refused nothing, a ClusterQueue
with quota for one gang, and the jobs and Workloads the tests read."""

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from testbed.controlplane import ControlPlane
from testbed.crds import install_crd
from testbed.harness import Harness
from testbed.helm import Helm
from testbed.kueue import KueueProcess
from testbed.operator import OperatorProcess, operator_running
from tests.support.chart import ChartIdentity, refusals

Manifest = dict[str, Any]
KUEUE = ("kueue.x-k8s.io", "v1beta2")
GPU = "nvidia.com/gpu"
FLAVOR_TOLERATION = {"key": "tj-test/reserved", "operator": "Exists", "effect": "NoSchedule"}
GANG_GPUS = 8  # a job of two workers with 4 GPUs each: the ClusterQueue's whole quota


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


def queued_reason(job: Manifest) -> str | None:
    found = [c for c in (job.get("status") or {}).get("conditions", []) if c["type"] == "Queued"]
    return str(found[0]["reason"]) if found and found[0]["status"] == "True" else None
