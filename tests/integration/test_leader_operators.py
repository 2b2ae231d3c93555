"""Leader election with two operators as processes on the cluster tier: only the Lease holder acts, and a standby
takes over and restarts the gang when the leader dies (within the lease)."""

import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from testbed.controlplane import ControlPlane
from testbed.crds import install_crd
from testbed.harness import Harness
from testbed.operator import OperatorProcess
from testbed.processes import poll_until
from tests.support.builders import job_manifest

pytestmark = pytest.mark.cluster
LEASE_SECONDS = 3.0


@pytest.fixture
def two_operators(cluster: ControlPlane) -> Iterator[tuple[OperatorProcess, OperatorProcess]]:
    """The installed operator (its Lease namespace set, as the chart does) and a stray local run started after it
    without a Lease namespace: the stray one must find the installed one's Lease and stand by."""
    with cluster.api_client() as api:
        install_crd(api)
        namespace = f"tj-system-{uuid.uuid4().hex[:6]}"
        client.CoreV1Api(api).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    # A Lease name of their own: operators of earlier tests left theirs (default name) in other namespaces.
    timing = {
        "TJ_OPERATOR_LEASE_NAME": f"tj-{uuid.uuid4().hex[:8]}",
        "TJ_OPERATOR_LEASE_DURATION_SECONDS": str(LEASE_SECONDS),
        "TJ_OPERATOR_LEASE_RENEW_SECONDS": "0.5",
    }
    with tempfile.TemporaryDirectory(prefix="tj-leader-") as logs:
        installed = OperatorProcess(
            cluster.kubeconfig, Path(logs) / "1", TJ_OPERATOR_LEASE_NAMESPACE=namespace, **timing
        )
        stray = OperatorProcess(cluster.kubeconfig, Path(logs) / "2", **timing)  # each makes its log folder
        installed.start()
        try:
            poll_until(lambda: "leading as" in installed.log(), timeout=30, what="the installed operator to lead")
            stray.start()
            yield installed, stray
        finally:
            installed.stop()
            stray.stop()
            with cluster.api_client() as api:
                client.CoreV1Api(api).delete_namespace(namespace)


def test_two_operators_one_acts_and_the_standby_takes_over_when_it_dies(
    cluster: ControlPlane, cluster_ns: str, two_operators: tuple[OperatorProcess, OperatorProcess]
) -> None:
    leader, standby = two_operators
    poll_until(lambda: standby.server is not None and "operator started" in standby.log(), timeout=30, what="start")
    with cluster.api_client() as api:
        h = Harness(api, cluster_ns, leader)
        h.create(job_manifest("led", workers=3))
        first = h.wait_running_pods("led", 3, attempt=1)
        h.wait_phase("led", "Running")
        assert standby.reconciles() == 0, "the standby reconciled while the leader lived"
        assert h.wait_event("led", "JobCreated").count("JobCreated") == 1
        leader.kill()
        died = time.monotonic()
        h.finish(first[0].metadata.name, 75)
        h.operator = standby
        h.wait_phase("led", "Running", attempt=2, timeout=30)
        took = time.monotonic() - died
        assert "leading as" in standby.log()
        assert took < LEASE_SECONDS + 10, f"the standby took {took:.1f} s to take over and restart the gang"
        assert h.job("led")["status"]["restarts"]["retryable"] == 1
        print(f"takeover and restart {took:.1f} s after the leader was killed (lease {LEASE_SECONDS} s)")
