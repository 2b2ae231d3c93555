"""The cluster tier is real: scheduling of GPUs, garbage collection, pod endings (kwok, the Eviction API, a lost
node). The envtest tier's own checks are in test_envtest.py."""

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, watch
from testbed import kwok, pods
from testbed.controlplane import GPU_NODES, ControlPlane
from testbed.kwok_deletes import Ask
from testbed.processes import poll_until

pytestmark = pytest.mark.cluster
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"


def pod_manifest(name: str, gpus: int = 0, **spec: Any) -> client.V1Pod:
    limits = {kwok.GPU_RESOURCE: str(gpus)} if gpus else None
    container = client.V1Container(
        name="main", image=PAUSE_IMAGE, resources=client.V1ResourceRequirements(limits=limits)
    )
    return client.V1Pod(
        metadata=client.V1ObjectMeta(
            name=name,
            annotations=spec.pop("annotations", None),
            owner_references=spec.pop("owner_references", None),
        ),
        spec=client.V1PodSpec(containers=[container], restart_policy="Never", **spec),
    )


@pytest.fixture
def core(cluster: ControlPlane) -> Iterator[client.CoreV1Api]:
    with cluster.api_client() as api:
        yield client.CoreV1Api(api)


def wait_for_pod(core: client.CoreV1Api, ns: str, name: str, phase: str, timeout: float = 30) -> client.V1Pod:
    def check() -> client.V1Pod | None:
        pod = core.read_namespaced_pod(name, ns)
        return pod if pod.status.phase == phase else None

    return poll_until(check, timeout=timeout, what=f"pod {name} to be {phase}")


def wait_for_pod_gone(core: client.CoreV1Api, ns: str, name: str, timeout: float) -> None:
    def gone() -> bool:
        try:
            core.read_namespaced_pod(name, ns)
        except client.ApiException as error:
            if error.status == 404:
                return True
            raise
        return False

    poll_until(gone, timeout=timeout, what=f"pod {name} to be deleted")


def terminated(pod: client.V1Pod) -> client.V1ContainerStateTerminated:
    return pod.status.container_statuses[0].state.terminated


def test_gpu_pod_is_scheduled_and_runs(core: client.CoreV1Api, cluster_ns: str) -> None:
    core.create_namespaced_pod(cluster_ns, pod_manifest("four-gpus", gpus=4))
    pod = wait_for_pod(core, cluster_ns, "four-gpus", "Running")
    assert pod.spec.node_name in GPU_NODES
    assert pod.status.pod_ip


def test_pod_asking_too_many_gpus_stays_unschedulable(core: client.CoreV1Api, cluster_ns: str) -> None:
    core.create_namespaced_pod(cluster_ns, pod_manifest("hundred-gpus", gpus=100))

    def unschedulable() -> client.V1PodCondition | None:
        conditions = core.read_namespaced_pod("hundred-gpus", cluster_ns).status.conditions or []
        return next((c for c in conditions if c.type == "PodScheduled" and c.reason == "Unschedulable"), None)

    condition = poll_until(unschedulable, timeout=30, what="the scheduler to report Unschedulable")
    assert kwok.GPU_RESOURCE in condition.message
    assert core.read_namespaced_pod("hundred-gpus", cluster_ns).status.phase == "Pending"


def test_deleting_the_owner_garbage_collects_its_pod(core: client.CoreV1Api, cluster_ns: str) -> None:
    owner = core.create_namespaced_config_map(
        cluster_ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="owner"))
    )
    reference = client.V1OwnerReference(api_version="v1", kind="ConfigMap", name="owner", uid=owner.metadata.uid)
    core.create_namespaced_pod(cluster_ns, pod_manifest("owned", owner_references=[reference]))
    wait_for_pod(core, cluster_ns, "owned", "Running")
    core.delete_namespaced_config_map("owner", cluster_ns)
    wait_for_pod_gone(core, cluster_ns, "owned", timeout=60)


@pytest.mark.parametrize(
    ("exit_code", "reason", "phase"),
    [(0, "Completed", "Succeeded"), (3, "Error", "Failed"), (137, "OOMKilled", "Failed")],
    ids=["success", "error-exit-3", "oom-killed"],
)
def test_injected_ending_shows_exit_code_and_reason(
    core: client.CoreV1Api, cluster_ns: str, exit_code: int, reason: str, phase: str
) -> None:
    core.create_namespaced_pod(cluster_ns, pod_manifest("ending"))
    wait_for_pod(core, cluster_ns, "ending", "Running")
    if reason == "OOMKilled":
        pods.oom_kill_pod(core, cluster_ns, "ending")
    else:
        pods.finish_pod(core, cluster_ns, "ending", exit_code)
    pod = wait_for_pod(core, cluster_ns, "ending", phase)
    assert (terminated(pod).exit_code, terminated(pod).reason) == (exit_code, reason)


def test_pod_annotations_make_kwok_end_it(core: client.CoreV1Api, cluster_ns: str) -> None:
    annotations = {kwok.EXIT_CODE_ANNOTATION: "42", kwok.RUN_FOR_ANNOTATION: "500ms"}
    core.create_namespaced_pod(cluster_ns, pod_manifest("self-ending", annotations=annotations))
    pod = wait_for_pod(core, cluster_ns, "self-ending", "Failed")
    assert (terminated(pod).exit_code, terminated(pod).reason) == (42, "Error")


def test_kubelet_eviction_marks_disruption(core: client.CoreV1Api, cluster_ns: str) -> None:
    core.create_namespaced_pod(cluster_ns, pod_manifest("pressured"))
    wait_for_pod(core, cluster_ns, "pressured", "Running")
    pods.evict_pod_by_kubelet(core, cluster_ns, "pressured")
    pod = wait_for_pod(core, cluster_ns, "pressured", "Failed")
    assert pod.status.reason == "Evicted"
    assert any(c.type == "DisruptionTarget" and c.status == "True" for c in pod.status.conditions)


def test_api_eviction_adds_disruption_target_then_deletes(core: client.CoreV1Api, cluster_ns: str) -> None:
    core.create_namespaced_pod(cluster_ns, pod_manifest("drained"))
    wait_for_pod(core, cluster_ns, "drained", "Running")
    since = core.read_namespaced_pod("drained", cluster_ns).metadata.resource_version
    pods.evict_pod(core, cluster_ns, "drained")
    disrupted, deleted = False, False
    for event in watch.Watch().stream(
        core.list_namespaced_pod,
        cluster_ns,
        field_selector="metadata.name=drained",
        resource_version=since,
        timeout_seconds=30,
    ):
        conditions = event["object"].status.conditions or []
        disrupted |= any(c.type == "DisruptionTarget" and c.status == "True" for c in conditions)
        if event["type"] == "DELETED":
            deleted = True
            break
    assert (disrupted, deleted) == (True, True)


def test_node_loss_removes_its_pods(cluster: ControlPlane, core: client.CoreV1Api, cluster_ns: str) -> None:
    core.create_node(kwok.gpu_node("doomed-node", "127.0.10.99"))
    try:
        pod = pod_manifest("on-doomed-node", node_selector={"kubernetes.io/hostname": "doomed-node"})
        core.create_namespaced_pod(cluster_ns, pod)
        wait_for_pod(core, cluster_ns, "on-doomed-node", "Running")
    finally:
        pods.remove_node(core, "doomed-node")
    wait_for_pod_gone(core, cluster_ns, "on-doomed-node", timeout=120)


HOLD = "test.trainingjob.io/hold"


def test_a_deleted_pod_on_a_kwok_node_is_confirmed_and_its_finalizers_are_left_to_their_owner(
    core: client.CoreV1Api, cluster_ns: str
) -> None:
    held = pod_manifest("held")
    held.metadata.finalizers = [HOLD]
    core.create_namespaced_pod(cluster_ns, held)
    wait_for_pod(core, cluster_ns, "held", "Running")
    core.delete_namespaced_pod("held", cluster_ns)  # the default grace: 30 s, for the kubelet to confirm

    def confirmed_pod() -> client.V1Pod | None:
        pod = core.read_namespaced_pod("held", cluster_ns)
        return pod if pod.metadata.deletion_grace_period_seconds == 0 else None

    confirmed = poll_until(confirmed_pod, timeout=30, what="the deletion of pod held confirmed with no grace left")
    assert confirmed.metadata.finalizers == [HOLD]
    core.patch_namespaced_pod("held", cluster_ns, {"metadata": {"finalizers": None}})
    wait_for_pod_gone(core, cluster_ns, "held", timeout=30)


def test_a_late_confirmation_never_deletes_the_pod_created_since_under_the_same_name(
    cluster: ControlPlane, core: client.CoreV1Api, cluster_ns: str
) -> None:
    """kwok's own delete names the pod alone: one arriving after its pod was gone deleted the namesake (the chaos
    test's replaced parameter-server worker, counted as a disruption). The confirmation names the UID."""
    assert cluster.deletions is not None
    core.create_namespaced_pod(cluster_ns, pod_manifest("reused"))
    first = wait_for_pod(core, cluster_ns, "reused", "Running")
    core.delete_namespaced_pod("reused", cluster_ns)
    wait_for_pod_gone(core, cluster_ns, "reused", timeout=30)
    core.create_namespaced_pod(cluster_ns, pod_manifest("reused"))
    second = wait_for_pod(core, cluster_ns, "reused", "Running")
    late = Ask(cluster_ns, "reused", first.metadata.uid, first.spec.node_name)  # the first pod's, after it went
    assert cluster.deletions.confirm(late) is False
    now = core.read_namespaced_pod("reused", cluster_ns)
    assert (now.metadata.uid, now.metadata.deletion_timestamp) == (second.metadata.uid, None)
