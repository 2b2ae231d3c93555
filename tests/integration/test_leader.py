"""Leader election: of two operators only the Lease holder acts; a standby takes over when the leader dies (within
the lease) or shuts down (at once). The elector alone runs against the envtest apiserver with clocks the test
moves; the operators run as processes on the cluster tier."""

import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from tests.builders import job_manifest
from tests.integration.conftest import install_crd
from tests.support.controlplane import ControlPlane
from tests.support.harness import Harness
from tests.support.operator import OperatorProcess
from tests.support.processes import poll_until

from trainingjob.runtime.leader import LeaderElector, existing_lease_namespace

LEASE_SECONDS = 3.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def elector(
    api: client.ApiClient, namespace: str, identity: str, clock: Clock, lease: str = "tj-leader"
) -> LeaderElector:
    return LeaderElector(client.CoordinationV1Api(api), namespace, lease, identity, lease_seconds=15, clock=clock)


@pytest.mark.envtest
def test_one_leader_a_standby_and_a_takeover_when_the_lease_lapses(envtest: ControlPlane, envtest_ns: str) -> None:
    with envtest.api_client() as api:
        clock_a, clock_b = Clock(), Clock()
        a, b = elector(api, envtest_ns, "a", clock_a), elector(api, envtest_ns, "b", clock_b)
        assert a.try_once() and a.is_leader()
        assert not b.try_once() and not b.is_leader()
        clock_a.now += 5
        clock_b.now += 5
        assert a.try_once() and not b.try_once()  # renewed: b saw the Lease change and waits again
        clock_b.now += 16  # a stopped renewing (dead, or cut off) for longer than the lease
        clock_a.now += 16
        assert not a.is_leader()  # a stops acting by itself before b may take over
        assert b.try_once() and b.is_leader()
        assert not a.try_once() and not a.is_leader()
        lease = client.CoordinationV1Api(api).read_namespaced_lease("tj-leader", envtest_ns)
        assert lease.spec.holder_identity == "b" and lease.spec.lease_transitions == 1


@pytest.mark.envtest
def test_a_run_outside_the_cluster_finds_the_installed_operators_lease(envtest: ControlPlane, envtest_ns: str) -> None:
    with envtest.api_client() as api:
        coordination, lease = client.CoordinationV1Api(api), f"tj-{uuid.uuid4().hex[:8]}"
        assert existing_lease_namespace(coordination, lease) is None
        assert elector(api, envtest_ns, "a", Clock(), lease).try_once()
        assert existing_lease_namespace(coordination, lease) == envtest_ns


@pytest.mark.envtest
def test_a_released_lease_is_taken_at_once(envtest: ControlPlane, envtest_ns: str) -> None:
    with envtest.api_client() as api:
        clock = Clock()
        a, b = elector(api, envtest_ns, "a", clock), elector(api, envtest_ns, "b", clock)
        assert a.try_once() and not b.try_once()
        a.release()
        assert not a.is_leader() and b.try_once()


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
        stray = OperatorProcess(cluster.kubeconfig, Path(logs) / "2", **timing)
        for process in (installed, stray):
            process.log_dir.mkdir()
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


@pytest.mark.cluster
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
