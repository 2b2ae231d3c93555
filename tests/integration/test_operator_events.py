"""The operator under the event sequences production clusters produce, on the cluster tier: refused creations
(a ResourceQuota, Pod Security), a job re-created under the same name, a pod stuck terminating on an
unreachable node, kubelet reasons with a slash, pods a node refuses to admit, a hostile progress endpoint, a missing
volume, and jobs deleted while they are reconciled."""

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from testbed.controlplane import ControlPlane
from testbed.crds import install_crd
from testbed.harness import Harness, condition, progress_endpoint
from testbed.kwok import NODE_ANNOTATION, gpu_node
from testbed.operator import OperatorProcess, operator_running
from testbed.pods import refuse_pod_on_its_node
from testbed.processes import poll_until
from tests.support.builders import job_manifest

pytestmark = pytest.mark.cluster
TERMINATING_TIMEOUT = 3
Manifest = dict[str, Any]
GRACE = 5  # the stranded pods' grace period: the force-delete waits it out first


@pytest.fixture(scope="module")
def operator(cluster: ControlPlane) -> Iterator[OperatorProcess]:
    with cluster.api_client() as api:
        install_crd(api)
    with operator_running(
        cluster.kubeconfig, TJ_OPERATOR_TERMINATING_TIMEOUT_SECONDS=str(TERMINATING_TIMEOUT)
    ) as process:
        yield process


def quota(h: Harness, pods: int) -> None:
    body = client.V1ResourceQuota(
        metadata=client.V1ObjectMeta(name="pods"), spec=client.V1ResourceQuotaSpec(hard={"pods": str(pods)})
    )
    h.core.create_namespaced_resource_quota(h.ns, body)
    poll_until(
        lambda: h.core.read_namespaced_resource_quota("pods", h.ns).status.hard, timeout=30, what="the quota counted"
    )


def test_a_partly_refused_gang_waits_says_why_and_starts_when_the_quota_allows(h: Harness) -> None:
    quota(h, 1)
    h.create(job_manifest("squeezed", runPolicy={"restartPolicy": "Never"}))
    refused = h.wait(
        "squeezed",
        lambda job: any(
            c["type"] == "Created" and c["reason"] == "PodCreateRefused"
            for c in (job.get("status") or {}).get("conditions", [])
        ),
        "the refusal in the Created condition",
    )
    assert "exceeded quota" in condition(refused, "Created")["message"]
    assert refused["status"]["restarts"]["disruption"] == 0 and refused["status"]["phase"] == "Pending"
    assert h.wait_event("squeezed", "PodCreateRefused").count("PodCreateRefused") == 1
    h.core.delete_namespaced_resource_quota("pods", h.ns)
    running = h.wait_phase("squeezed", "Running", timeout=90)
    assert running["status"]["attempt"] == 1 and running["status"]["restarts"]["disruption"] == 0


def test_a_wholly_refused_job_fails_at_its_startup_deadline_with_the_apiservers_message(h: Harness) -> None:
    quota(h, 0)
    h.create(job_manifest("nothing", runPolicy={"startupDeadlineSeconds": 5}))
    failed = h.wait_phase("nothing", "Failed", timeout=60)
    assert condition(failed, "Failed")["reason"] == "StartupDeadlineExceeded"
    assert "exceeded quota" in condition(failed, "Failed")["message"]


def test_a_job_runs_in_a_restricted_namespace_and_a_loosened_one_is_refused_saying_why(h: Harness) -> None:
    labels = {"pod-security.kubernetes.io/enforce": "restricted"}
    h.core.patch_namespace(h.ns, {"metadata": {"labels": labels}})
    h.create(job_manifest("secure"))
    h.wait_phase("secure", "Running")
    loosened = job_manifest("locked")
    loosened["spec"]["workers"]["securityContext"] = {"runAsUser": 0, "runAsNonRoot": False}
    h.create(loosened)
    refused = h.wait(
        "locked",
        lambda job: "PodSecurity" in condition(job, "Created").get("message", "") if job.get("status") else False,
        "the Pod Security refusal in the Created condition",
    )
    assert refused["status"]["phase"] == "Pending" and not h.pods("locked")


def test_a_job_created_again_under_its_name_never_adopts_the_old_pods(h: Harness) -> None:
    h.create(job_manifest("again"))
    old = h.wait_running_pods("again", 2, attempt=1)
    for pod in old:
        h.finish(pod.metadata.name, 0)
    h.wait_phase("again", "Succeeded")
    h.custom.delete_namespaced_custom_object("trainingjob.io", "v1alpha1", h.ns, "trainingjobs", "again")
    h.wait_gone("again", "the first job deleted")
    h.create(job_manifest("again"))
    running = h.wait_phase("again", "Running", timeout=90)
    new = h.wait_running_pods("again", 2, attempt=1)
    assert not {p.metadata.uid for p in old} & {p.metadata.uid for p in new}
    assert running["status"]["workers"]["succeeded"] == 0


def test_a_pod_stuck_terminating_on_an_unreachable_node_is_force_deleted(h: Harness) -> None:
    node = gpu_node("unreachable-node", "127.0.10.97")
    del node["metadata"]["annotations"][NODE_ANNOTATION]  # no kwok: nothing ever confirms a deletion there
    h.core.create_node(node)
    try:
        manifest = job_manifest("stranded", workers=2)
        manifest["spec"]["workers"]["nodeSelector"] = {"kubernetes.io/hostname": "unreachable-node"}
        manifest["spec"]["workers"]["terminationGracePeriodSeconds"] = GRACE
        h.create(manifest)
        pods = poll_until(lambda: h.pods("stranded") if len(h.pods("stranded")) == 2 else None, timeout=30, what="pods")
        for pod in pods:  # the kubelet's last word before its node went silent
            h.core.patch_namespaced_pod_status(pod.metadata.name, h.ns, {"status": {"phase": "Running"}})
        h.finish(pods[0].metadata.name, 75)
        restarted = h.wait(
            "stranded", lambda job: bool(job.get("status")) and job["status"]["attempt"] == 2, "a restart", timeout=30
        )
        assert restarted["status"]["restarts"]["retryable"] == 1
        # Each old pod waits out its grace period and the timeout, then goes by force.
        poll_until(
            lambda: (
                {p.metadata.labels["trainingjob.io/attempt"] for p in h.pods("stranded")} == {"2"}
                and len(h.pods("stranded")) == 2
            ),
            timeout=GRACE + TERMINATING_TIMEOUT + 30,
            what="attempt 2's pods after the stuck ones were force-deleted",
        )
        h.wait_event("stranded", "ForceDeleted")
    finally:
        h.core.delete_node("unreachable-node")


def test_a_kubelet_reason_with_a_slash_restarts_the_gang(h: Harness) -> None:
    h.create(job_manifest("admission"))
    first = h.wait_running_pods("admission", 2, attempt=1)
    h.finish(first[1].metadata.name, 1, reason="OutOfnvidia.com/gpu", message="Pod was rejected: nvidia.com/gpu")
    restarted = h.wait_phase("admission", "Restarting", attempt=2)
    assert restarted["status"]["lastFailure"]["reason"] == "OutOfnvidia.com/gpu"
    h.wait_phase("admission", "Running", attempt=2)


def test_a_pod_its_node_refused_is_created_again_alone_and_no_restart_is_counted(h: Harness) -> None:
    h.create(job_manifest("refused", runPolicy={"backoffLimit": 0, "disruptionLimit": 0}))
    first = h.wait_running_pods("refused", 2, attempt=1)
    node, message = first[1].spec.node_name, "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu"
    refuse_pod_on_its_node(h.core, h.ns, first[1].metadata.name, "OutOfnvidia.com/gpu", message)
    h.wait_event("refused", "PodRefusedByNode")
    events = h.core.list_namespaced_event(h.ns, field_selector="involvedObject.name=refused").items
    warning = next(e.message for e in events if e.reason == "PodRefusedByNode")
    assert f"Pod {first[1].metadata.name} was refused by node {node}" in warning and message in warning, warning
    again = h.wait_running_pods("refused", 2, attempt=1)  # the refused pod alone, created again after its backoff
    assert again[0].metadata.uid == first[0].metadata.uid and again[1].metadata.uid != first[1].metadata.uid
    job = h.wait("refused", lambda j: all(not r.get("refused") for r in j["status"].get("replacements", [])), "cleared")
    assert job["status"]["attempt"] == 1 and not any(job["status"]["restarts"].values())
    assert job["status"]["phase"] == "Running"


def refuse_every_pod_placed(h: Harness, job: str, node: str, refused: set[str]) -> None:
    """What a node whose device plugin lost its GPUs does: the scheduler's binding of each of the job's pods that
    left the tracking gate (the node is no kwok node: it never runs them), then its kubelet's refusal."""
    for pod in h.pods(job):
        if pod.spec.scheduling_gates or pod.status.phase != "Pending" or pod.metadata.uid in refused:
            continue
        if not pod.spec.node_name:
            target = client.V1ObjectReference(api_version="v1", kind="Node", name=node)
            binding = client.V1Binding(metadata=client.V1ObjectMeta(name=pod.metadata.name), target=target)
            h.core.create_namespaced_pod_binding(pod.metadata.name, h.ns, binding, _preload_content=False)
        refuse_pod_on_its_node(h.core, h.ns, pod.metadata.name, "OutOfnvidia.com/gpu", "Pod was rejected: nvidia.com")
        refused.add(pod.metadata.uid)


def test_pods_no_node_admits_fail_the_job_at_its_startup_deadline_naming_the_node(h: Harness) -> None:
    node = gpu_node("lying-node", "127.0.10.98")
    del node["metadata"]["annotations"][NODE_ANNOTATION]  # no kwok: its "kubelet" is this test, refusing every pod
    h.core.create_node(node)
    try:
        manifest = job_manifest("nowhere", runPolicy={"startupDeadlineSeconds": 20, "disruptionLimit": 1})
        manifest["spec"]["workers"]["nodeSelector"] = {"kubernetes.io/hostname": "lying-node"}
        h.create(manifest)
        refused: set[str] = set()

        def failed() -> Manifest | None:
            refuse_every_pod_placed(h, "nowhere", "lying-node", refused)
            job = h.job("nowhere")
            return job if (job.get("status") or {}).get("phase") == "Failed" else None

        job = poll_until(failed, timeout=90, interval=0.5, what="the job failed")
        assert len(refused) >= 3, refused  # refused, created again alone, refused again...
        status = job["status"]
        assert status["attempt"] == 1 and not any(status["restarts"].values()), status["restarts"]
        said = condition(job, "Failed")
        assert said["reason"] == "StartupDeadlineExceeded", said
        assert "was refused by node lying-node: OutOfnvidia.com/gpu" in said["message"], said["message"]
        assert status["lastFailure"]["reason"] == "OutOfnvidia.com/gpu"
    finally:
        h.core.delete_node("lying-node")


@pytest.mark.parametrize(
    "report", [[1, 2, 3], {"step": 10**30, "heartbeat": 1e308}, "x" * 100_000], ids=["list", "huge", "long"]
)
def test_a_hostile_progress_endpoint_changes_nothing(h: Harness, report: object, operator: OperatorProcess) -> None:
    h.create(job_manifest("noisy", runPolicy={"progressDeadlineSeconds": 60}))
    rank0 = h.wait_running_pods("noisy", 2, attempt=1)[0]
    with progress_endpoint(rank0.status.pod_ip, report):
        h.patch_spec("noisy", {"runPolicy": {"backoffLimit": 5}})  # a reconcile that reads the endpoint
        job = h.wait("noisy", lambda j: (j.get("status") or {}).get("observedGeneration") == 2, "a reconcile")
    assert job["status"]["phase"] == "Running" and "progress" not in job["status"]
    assert "Traceback" not in operator.log()


def test_a_missing_volume_is_named_while_the_job_waits(h: Harness) -> None:
    checkpoint = {"volume": {"persistentVolumeClaim": {"claimName": "nowhere"}}, "everySteps": 10}
    h.create(job_manifest("homeless", checkpoint=checkpoint))
    waiting = h.wait(
        "homeless",
        lambda job: "nowhere" in condition(job, "Running").get("message", "") if job.get("status") else False,
        "the missing claim named in the Running condition",
    )
    assert waiting["status"]["phase"] == "Pending" and condition(waiting, "Running")["status"] == "False"


def test_jobs_deleted_while_reconciled_are_no_error(h: Harness, operator: OperatorProcess) -> None:
    before = operator.log().count("Traceback")
    names = [f"brief-{i}" for i in range(8)]
    for name in names:
        h.create(job_manifest(name, workers=4))
    for name in names:
        h.custom.delete_namespaced_custom_object("trainingjob.io", "v1alpha1", h.ns, "trainingjobs", name)
    for name in names:
        h.wait_gone(name, f"{name} deleted")
    poll_until(lambda: not any(h.pods(n) for n in names), timeout=60, what="their pods collected")
    log = operator.log()
    assert log.count("Traceback") == before and " ERROR " not in log
