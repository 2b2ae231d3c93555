"""The operator's Events on a real apiserver: recorded on the job, and quietly dropped (no RBAC-like warning) when
the job's namespace is being deleted, which refuses new content with a 403."""

import logging

import pytest
from kubernetes import client
from testbed.controlplane import ControlPlane
from tests.support.builders import job_manifest

from trainingjob.kube.job_cluster import KubernetesCluster
from trainingjob.model import GROUP, PLURAL, VERSION
from trainingjob.plan import Event

pytestmark = pytest.mark.envtest


def test_events_are_recorded_and_a_dying_namespace_refuses_them_quietly(
    trainingjob_crd: ControlPlane, envtest_ns: str, caplog: pytest.LogCaptureFixture
) -> None:
    with trainingjob_crd.api_client() as api:
        custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
        job = custom.create_namespaced_custom_object(GROUP, VERSION, envtest_ns, PLURAL, job_manifest("noted"))
        cluster = KubernetesCluster(api)
        cluster.emit(job, [Event("Normal", "Noted", "recorded")])
        events = core.list_namespaced_event(envtest_ns, field_selector="involvedObject.name=noted").items
        assert [(e.reason, e.involved_object.uid) for e in events] == [("Noted", job["metadata"]["uid"])]

        core.delete_namespace(envtest_ns)  # envtest runs no namespace controller: it stays Terminating
        with caplog.at_level(logging.DEBUG, logger="trainingjob.kube.job_cluster"):
            cluster.emit(job, [Event("Normal", "TooLate", "refused")])
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
        assert "namespace is being deleted" in caplog.text
