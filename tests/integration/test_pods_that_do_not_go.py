"""A pod that does not go (a finalizer nobody removes, as Kueue's while Kueue is down, a mesh's or a backup
controller's): the operator asks no more of it than the apiserver can do (a pod never scheduled was deleted with no
grace left, so no force delete), says once which pod and which finalizer the next attempt waits for, polls with a
growing delay rather than every 2 s, and the startup deadline counts the wait, so the job ends with words instead of
waiting for ever. The pod here is one never scheduled."""

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from testbed.controlplane import ControlPlane
from testbed.crds import install_crd
from testbed.harness import Harness, condition
from testbed.operator import OperatorProcess, operator_running
from testbed.processes import poll_until
from tests.support.builders import job_manifest

from trainingjob.generate import crd

pytestmark = pytest.mark.cluster

HOLD = "example.com/backup-hold"


@pytest.fixture(scope="module")
def operator(cluster: ControlPlane) -> Iterator[OperatorProcess]:
    """The operator with a short terminatingTimeout: a pod still there a second after its grace period is stuck."""
    with cluster.api_client() as api:
        for resource in crd.RESOURCES:
            install_crd(api, resource)
    with operator_running(cluster.kubeconfig, TJ_OPERATOR_TERMINATING_TIMEOUT_SECONDS="1") as process:
        yield process


def _reasons(h: Harness, name: str) -> list[str]:
    return [e.reason for e in h.core.list_namespaced_event(h.ns, field_selector=f"involvedObject.name={name}").items]


@contextlib.contextmanager
def held(h: Harness, pod: str) -> Iterator[None]:
    """The pod kept by a finalizer nobody removes, until the test ends."""
    h.core.patch_namespaced_pod(pod, h.ns, {"metadata": {"finalizers": [HOLD]}})
    try:
        yield
    finally:  # let the namespace go
        try:
            h.core.patch_namespaced_pod(pod, h.ns, {"metadata": {"finalizers": None}})
        except client.ApiException as error:
            if error.status != 404:
                raise


def test_a_pod_kept_by_a_finalizer_is_waited_for_with_words_until_the_startup_deadline(h: Harness) -> None:
    manifest: dict[str, Any] = job_manifest("held", runPolicy={"startupDeadlineSeconds": 20})
    manifest["spec"]["workers"]["nodeSelector"] = {"kubernetes.io/hostname": "nowhere"}  # never scheduled
    h.create(manifest)
    poll_until(lambda: len(h.pods("held")) == 2, timeout=30, what="the pods of attempt 1")
    with held(h, "held-worker-0-1"):
        h.core.delete_namespaced_pod("held-worker-1-1", h.ns)  # someone deletes a pod: the gang restarts
        waiting = h.wait(
            "held",
            lambda job: HOLD in condition(job, "Created").get("message", ""),
            "the Created condition naming the finalizer",
        )
        created = condition(waiting, "Created")
        assert created["reason"] == "PodsStuckTerminating" and "pod held-worker-0-1" in created["message"]
        running = condition(waiting, "Running")["message"]
        assert "not created yet" not in running and HOLD in running
        failed = h.wait_phase("held", "Failed", timeout=60)
    assert condition(failed, "Failed")["reason"] == "StartupDeadlineExceeded"
    assert HOLD in condition(failed, "Failed")["message"]
    reasons = _reasons(h, "held")
    assert reasons.count("PodsStuckTerminating") == 1 and "ForceDeleted" not in reasons, reasons
