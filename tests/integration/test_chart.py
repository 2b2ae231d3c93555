"""The operator running under exactly the chart's RBAC (its ServiceAccount's token) on the cluster tier, through real
job and sweep lifecycles; what that identity is refused."""

import json
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from testbed.controlplane import ControlPlane
from testbed.crds import install_crd
from testbed.harness import Harness, condition, progress_endpoint
from testbed.helm import Helm
from testbed.operator import OperatorProcess, operator_running
from testbed.processes import poll_until
from tests.support.builders import SWEEP_PARAMETERS, job_manifest, sweep_manifest
from tests.support.chart import ChartIdentity, operator_env, refusals

from trainingjob.children.naming import TRACKING_FINALIZER, job_selector
from trainingjob.generate import crd
from trainingjob.model import GROUP, VERSION
from trainingjob.model.sweep import SWEEP_PLURAL

pytestmark = pytest.mark.cluster
TRAINER_IMAGE = "registry.example/team/trainer:2"  # operator.settings.defaultTrainerImage of the cluster tier


@pytest.fixture(scope="module")
def chart_identity(cluster: ControlPlane, helm: Helm) -> Iterator[ChartIdentity]:
    with cluster.api_client() as api:
        for resource in crd.RESOURCES:
            install_crd(api, resource)
    with tempfile.TemporaryDirectory(prefix="tj-chart-rbac-") as folder:
        identity = ChartIdentity(cluster, helm, Path(folder))
        try:
            yield identity
        finally:
            identity.remove()


@pytest.fixture(scope="module")
def chart_operator(cluster: ControlPlane, chart_identity: ChartIdentity, helm: Helm) -> Iterator[OperatorProcess]:
    """The operator as the chart's ServiceAccount, with the default trainer image the chart passes it; its /metrics
    read by a scraper the admin made (the operator reviews the scraper's token with its own rights)."""
    image = operator_env(helm, {"operator.settings.defaultTrainerImage": TRAINER_IMAGE})
    settings = {"TJ_OPERATOR_DEFAULT_TRAINER_IMAGE": image["TJ_OPERATOR_DEFAULT_TRAINER_IMAGE"]}
    with operator_running(
        chart_identity.kubeconfig, cluster.kubeconfig, TJ_OPERATOR_LEASE_NAMESPACE=chart_identity.namespace, **settings
    ) as process:
        yield process


@pytest.fixture
def h(cluster: ControlPlane, cluster_ns: str, chart_operator: OperatorProcess) -> Iterator[Harness]:
    with cluster.api_client() as api:
        yield Harness(api, cluster_ns, chart_operator)


def test_the_identity_is_the_chart_service_account(chart_identity: ChartIdentity) -> None:
    with chart_identity.plane.api_client(chart_identity.kubeconfig) as api:
        review = client.AuthenticationV1Api(api).create_self_subject_review(client.V1SelfSubjectReview())
    expected = f"system:serviceaccount:{chart_identity.namespace}:{chart_identity.account}"
    assert review.status.user_info.username == expected


def test_chart_rbac_runs_a_job_to_success(h: Harness) -> None:
    h.create(job_manifest("ok"))
    h.wait_phase("ok", "Running")
    for pod in h.wait_running_pods("ok", 2, attempt=1):
        h.finish(pod.metadata.name, 0)
    done = h.wait_phase("ok", "Succeeded")
    assert condition(done, "Succeeded")["status"] == "True"
    assert "JobCreated" in h.wait_event("ok", "JobSucceeded")  # events: create
    assert h.core.read_namespaced_service("ok", h.ns)  # services: create

    def let_go() -> bool:  # pods: patch (each loses the tracking finalizer it was created with once it succeeded)
        pods = h.core.list_namespaced_pod(h.ns, label_selector=job_selector("ok")).items
        return len(pods) == 2 and not any(TRACKING_FINALIZER in (p.metadata.finalizers or []) for p in pods)

    poll_until(let_go, timeout=60, interval=0.2, what="the job's pods let go of")


@pytest.mark.parametrize("action", [None, "Suspend"], ids=["deleted-by-default", "suspended"])
def test_chart_rbac_runs_a_sweep_and_stops_its_pruned_trial(h: Harness, action: str | None) -> None:
    """trainingsweeps: list, watch; their status: patch; trainingjobs: create, delete (a pruned trial's job ends, the
    default) or patch (a pruned trial suspended, `action: Suspend`)."""
    stopping = {"algorithm": "Median", "startupTrials": 1} | ({"action": action} if action else {})
    manifest = sweep_manifest(
        "sw", parameters=[SWEEP_PARAMETERS[1]], parallelism=2, maxTrials=2, earlyStopping=stopping
    )
    manifest["spec"]["template"]["spec"]["workers"] = {"replicas": 1}
    h.custom.create_namespaced_custom_object(GROUP, VERSION, h.ns, SWEEP_PLURAL, manifest)
    for number, accuracy in ((0, 0.9), (1, 0.1)):
        (rank0,) = h.wait_running_pods(f"sw-{number}", 1, attempt=1)
        report = {"step": 10, "heartbeat": time.time(), "metrics": {"accuracy": accuracy}, "metricsStep": 10}
        if number == 0:
            final = {**report, "step": 100, "finished": True}
            h.finish(rank0.metadata.name, 0, message=json.dumps(final))
            h.wait_phase("sw-0", "Succeeded")
        else:
            with progress_endpoint(rank0.status.pod_ip, report):
                if action == "Suspend":
                    h.wait("sw-1", lambda job: job["spec"]["runPolicy"].get("suspend"), "the pruned trial suspended")
                else:
                    h.wait_gone("sw-1", "the pruned trial's job deleted")
    sweep = h.custom.get_namespaced_custom_object(GROUP, VERSION, h.ns, SWEEP_PLURAL, "sw")
    assert [t["phase"] for t in sweep["status"]["trials"]] == ["Succeeded", "Pruned"]


def test_a_job_without_an_image_runs_the_charts_default_trainer_image(h: Harness) -> None:
    h.create(
        job_manifest(
            "defaulted", workers={"replicas": 1, "image": "example.com/own:1"}, servers=1, mode="ParameterServer"
        )
    )
    (server, worker) = sorted(h.wait_running_pods("defaulted", 2, attempt=1), key=lambda p: p.metadata.name)
    assert (server.spec.containers[0].image, worker.spec.containers[0].image) == (TRAINER_IMAGE, "example.com/own:1")
    assert h.job("defaulted")["status"]["defaultImage"] == TRAINER_IMAGE


def test_chart_rbac_restarts_the_gang_after_a_failed_rank(h: Harness) -> None:
    h.create(job_manifest("gang", workers=3))
    first = h.wait_running_pods("gang", 3, attempt=1)
    h.finish(first[1].metadata.name, 75)
    restarted = h.wait_phase("gang", "Running", attempt=2)
    h.wait_running_pods("gang", 3, attempt=2)  # pods: delete + create
    assert restarted["status"]["restarts"]["retryable"] == 1
    assert restarted["status"]["lastFailure"]["pod"] == first[1].metadata.name


def test_chart_rbac_suspends_and_resumes(h: Harness) -> None:
    h.create(job_manifest("pausable"))
    h.wait_running_pods("pausable", 2, attempt=1)
    h.patch_spec("pausable", {"runPolicy": {"suspend": True}})
    h.wait_phase("pausable", "Suspended")
    poll_until(lambda: not h.pods("pausable"), timeout=30, what="pods of a suspended job to go")
    h.patch_spec("pausable", {"runPolicy": {"suspend": False}})
    h.wait_running_pods("pausable", 2, attempt=2)
    h.wait_phase("pausable", "Running", attempt=2)


def test_chart_rbac_deletes_a_finished_job_after_its_ttl(h: Harness) -> None:
    h.create(job_manifest("shortlived", runPolicy={"ttlSecondsAfterFinished": 1}))
    h.finish(h.wait_running_pods("shortlived", 2, attempt=1)[0].metadata.name, 78)
    h.wait_phase("shortlived", "Failed")
    h.wait_gone("shortlived", "the job deleted after its TTL (trainingjobs: delete)")


def test_the_chart_operator_reviews_who_reads_its_metrics(chart_operator: OperatorProcess, h: Harness) -> None:
    """tokenreviews and subjectaccessreviews: create. A scraper with `get /metrics` reads the jobs' series; the same
    request without its token is refused (503 would say the chart's identity could not ask)."""
    status, text = chart_operator.scrape()
    assert status == 200 and "trainingjob_queue_depth" in text, text
    anonymous = urllib.request.Request(f"http://127.0.0.1:{chart_operator.metrics_port}/metrics")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(anonymous, timeout=5)
    assert refused.value.code == 401


def test_the_operator_was_never_forbidden(chart_operator: OperatorProcess, h: Harness) -> None:
    """Runs after the lifecycles above: nothing the operator (or kopf) did was refused by RBAC."""
    refused = refusals(chart_operator)
    assert not refused, "\n".join(refused[:20])


@pytest.mark.parametrize(
    "attempt",
    [
        pytest.param(lambda core, ns: core.list_namespaced_secret(ns), id="read-secrets-in-a-job-namespace"),
        pytest.param(lambda core, ns: core.list_secret_for_all_namespaces(), id="list-secrets-cluster-wide"),
        pytest.param(lambda core, ns: core.read_namespaced_secret("any", ns), id="get-a-secret"),
        pytest.param(lambda core, ns: core.delete_node("gpu-node-0", dry_run="All"), id="delete-a-node"),
        pytest.param(lambda core, ns: core.list_namespaced_config_map(ns), id="read-configmaps"),
        pytest.param(lambda core, ns: core.patch_namespaced_pod_status("x", ns, {}), id="write-pod-status"),
    ],
)
def test_the_chart_identity_is_refused_what_it_does_not_need(
    chart_identity: ChartIdentity, cluster_ns: str, attempt: Any
) -> None:
    with (
        chart_identity.plane.api_client(chart_identity.kubeconfig) as api,
        pytest.raises(client.ApiException) as refused,
    ):
        attempt(client.CoreV1Api(api), cluster_ns)
    assert refused.value.status == 403
