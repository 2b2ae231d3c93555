"""Leader election, the elector alone against the envtest apiserver with clocks the test moves: one leader, a
standby, a takeover when the lease lapses, a released lease taken at once. Two operators as processes on the
cluster tier: test_leader_operators.py."""

import uuid

import pytest
from kubernetes import client
from testbed.controlplane import ControlPlane

from trainingjob.runtime.leader import LeaderElector, existing_lease_namespace

pytestmark = pytest.mark.envtest


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def elector(
    api: client.ApiClient, namespace: str, identity: str, clock: Clock, lease: str = "tj-leader"
) -> LeaderElector:
    return LeaderElector(client.CoordinationV1Api(api), namespace, lease, identity, lease_seconds=15, clock=clock)


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


def test_a_run_outside_the_cluster_finds_the_installed_operators_lease(envtest: ControlPlane, envtest_ns: str) -> None:
    with envtest.api_client() as api:
        coordination, lease = client.CoordinationV1Api(api), f"tj-{uuid.uuid4().hex[:8]}"
        assert existing_lease_namespace(coordination, lease) is None
        assert elector(api, envtest_ns, "a", Clock(), lease).try_once()
        assert existing_lease_namespace(coordination, lease) == envtest_ns


def test_a_released_lease_is_taken_at_once(envtest: ControlPlane, envtest_ns: str) -> None:
    with envtest.api_client() as api:
        clock = Clock()
        a, b = elector(api, envtest_ns, "a", clock), elector(api, envtest_ns, "b", clock)
        assert a.try_once() and not b.try_once()
        a.release()
        assert not a.is_leader() and b.try_once()


def test_a_found_lease_namespace_that_goes_away_is_found_again(envtest: ControlPlane, envtest_ns: str) -> None:
    """A run that deferred to an installed operator's Lease (a namespace it found, not one it was given) leases
    elsewhere once that namespace is deleted, instead of failing to create its Lease there for ever."""
    with envtest.api_client() as api:
        core, coordination = client.CoreV1Api(api), client.CoordinationV1Api(api)
        doomed, lease, clock = f"tj-doomed-{uuid.uuid4().hex[:6]}", f"tj-{uuid.uuid4().hex[:8]}", Clock()
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=doomed)))
        a = LeaderElector(  # found `doomed` (an installed operator's); finding again now gives ours
            coordination, doomed, lease, "a", lease_seconds=15, clock=clock, find_namespace=lambda: envtest_ns
        )
        assert a.try_once()
        coordination.delete_namespaced_lease(lease, doomed)
        core.delete_namespace(doomed)  # Terminating here (no namespace controller): no Lease can be made in it
        clock.now += 20
        assert not a.try_once() and a.namespace == envtest_ns
        assert a.try_once() and coordination.read_namespaced_lease(lease, envtest_ns).spec.holder_identity == "a"
