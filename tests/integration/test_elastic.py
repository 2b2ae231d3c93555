"""An elastic DDP job on the cluster tier (real apiserver and scheduler, kwok nodes of one GPU each): it loses two of
its four nodes, waits resizeWaitSeconds for room, goes on with two workers without the resize counting as a restart,
and grows back to four at its next checkpoint once the nodes return (the operator finds the room on the nodes)."""

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from testbed import pods
from testbed.controlplane import ControlPlane
from testbed.crds import install_crd
from testbed.harness import Harness, progress_endpoint
from testbed.kwok import GPU_RESOURCE, gpu_node
from testbed.operator import OperatorProcess, operator_running
from tests.support import kubectl
from tests.support.builders import job_manifest

from trainingjob.generate import crd

pytestmark = pytest.mark.cluster
POOL = "trainingjob.io/elastic-test-pool"
Manifest = dict[str, Any]


@pytest.fixture(scope="module")
def operator(cluster: ControlPlane) -> Iterator[OperatorProcess]:
    """The operator waiting 2 s for room before it shrinks a job, and 3 s after a resize before it grows one."""
    with cluster.api_client() as api:
        for resource in crd.RESOURCES:
            install_crd(api, resource)
    settings = {"TJ_OPERATOR_RESIZE_WAIT_SECONDS": "2", "TJ_OPERATOR_RESIZE_INTERVAL_SECONDS": "3"}
    with operator_running(cluster.kubeconfig, TJ_OPERATOR_BACKOFF_BASE_SECONDS="0.5", **settings) as process:
        yield process


def _add_node(core: client.CoreV1Api, name: str, index: int, pool: str) -> None:
    node = gpu_node(name, f"127.0.11.{index + 1}", gpus=1)
    node["metadata"]["labels"][POOL] = pool
    core.create_node(node)


def _lose_node(core: client.CoreV1Api, namespace: str, name: str) -> None:
    """The node goes, and its pods with it, as the node lifecycle controller and the pod GC would."""
    pods.remove_node(core, name)
    for pod in core.list_namespaced_pod(namespace, field_selector=f"spec.nodeName={name}").items:
        try:
            core.delete_namespaced_pod(pod.metadata.name, namespace, grace_period_seconds=0)
        except client.ApiException as error:
            if error.status != 404:  # gone already: the pod GC or the operator was first
                raise


def _scale(job: Manifest) -> Manifest:
    return dict((job.get("status") or {}).get("scale") or {})


def _report(checkpoint: int) -> Manifest:
    return {"step": checkpoint, "loss": 0.5, "heartbeat": time.time(), "totalSteps": 1000,
            "lastCheckpointStep": checkpoint, "lastCheckpointPath": f"/ckpt/step-{checkpoint}",
            "lastCheckpointTime": time.time()}  # fmt: skip


def _workers_column(plane: ControlPlane, namespace: str) -> str:
    """The WORKERS column of `kubectl get tj elastic`, as the apiserver's table printer fills it."""
    (row,) = kubectl.table(kubectl.kubectl(plane.kubeconfig, "get", "tj", "elastic", "-n", namespace))
    return row["WORKERS"]


def test_an_elastic_job_shrinks_when_nodes_go_and_grows_back_when_they_return(
    h: Harness, cluster: ControlPlane
) -> None:
    names = [f"{h.ns}-gpu-{i}"[-63:] for i in range(4)]
    for i, name in enumerate(names):
        _add_node(h.core, name, i, h.ns)
    try:
        workers = {"replicas": 4, "minReplicas": 2, "nodeSelector": {POOL: h.ns}, "terminationGracePeriodSeconds": 0}
        workers["resources"] = {"limits": {GPU_RESOURCE: "1"}}
        checkpoint = {"volume": {"emptyDir": {}}, "everySteps": 10}
        h.create(job_manifest("elastic", workers=workers, checkpoint=checkpoint))
        h.wait_running_pods("elastic", 4, attempt=1)
        assert _scale(h.wait("elastic", lambda j: _scale(j).get("workers") == "4/4", "4/4 workers"))["current"] == 4

        for name in names[2:]:
            _lose_node(h.core, h.ns, name)
        shrunk = h.wait(
            "elastic",
            lambda j: _scale(j).get("workers") == "2/4" and j["status"]["phase"] == "Running",
            "running with 2 of 4 workers",
            timeout=90,
        )
        attempt = shrunk["status"]["attempt"]
        rank0, _ = h.wait_running_pods("elastic", 2, attempt=attempt)
        restarts = shrunk["status"]["restarts"]
        assert restarts.get("disruption") == 1 and sum(restarts.values()) == 1  # the node loss; not the resize
        assert _scale(shrunk)["reason"] in ("CapacityLost", "ResizeRateLimited")
        assert "Resized" in h.wait_event("elastic", "Resized")
        env = {e.name: e.value for e in rank0.spec.containers[0].env}
        assert (env["WORLD_SIZE"], env["TJ_DESIRED_WORLD_SIZE"]) == ("2", "4")
        assert _workers_column(cluster, h.ns) == "2/4"

        with progress_endpoint(rank0.status.pod_ip, _report(10)):
            h.wait("elastic", lambda j: (j["status"].get("lastCheckpoint") or {}).get("step") == 10, "checkpoint 10")
            for i, name in enumerate(names[2:], start=2):
                _add_node(h.core, name, i, h.ns)
            waiting = h.wait("elastic", lambda j: _scale(j).get("growAfterStep") == 10, "room seen", timeout=60)
            assert waiting["status"]["attempt"] == attempt  # not mid-step: it waits for the next checkpoint
        with progress_endpoint(rank0.status.pod_ip, _report(20)):
            grown = h.wait("elastic", lambda j: _scale(j).get("workers") == "4/4", "grown back to 4", timeout=60)
        h.wait_running_pods("elastic", 4, attempt=grown["status"]["attempt"])
        assert sum(h.job("elastic")["status"]["restarts"].values()) == 1
        assert _workers_column(cluster, h.ns) == "4/4"
    finally:
        for name in names:
            try:
                pods.remove_node(h.core, name)
            except client.ApiException as error:
                if error.status != 404:
                    raise
