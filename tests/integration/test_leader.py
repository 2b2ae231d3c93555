"""Leader election, the elector alone against the envtest apiserver with clocks the test moves: one leader, a
standby, a takeover when the lease lapses, a released lease taken at once, and only once the leader's reconciles
in flight have ended; a paused leader whose lease was taken writes nothing. Two operators as processes on the
cluster tier: test_leader_operators.py."""

import asyncio
import logging
import threading
import uuid

import pytest
from kubernetes import client
from testbed.controlplane import ControlPlane
from testbed.processes import poll_until

from trainingjob.kube.job_cluster import KubernetesCluster
from trainingjob.runtime.cached import CachedCluster, NotLeading
from trainingjob.runtime.in_flight import InFlight, step_down
from trainingjob.runtime.leader import LeaderElector, existing_lease_namespace
from trainingjob.runtime.memory import Stores

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


def test_a_leader_gives_its_lease_up_only_once_its_reconciles_in_flight_have_ended(
    envtest: ControlPlane, envtest_ns: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A rolling update: the old leader stops taking work, and the new one cannot lead while a reconcile of the old
    one still runs; it leads at once when that reconcile ends and the Lease is released."""
    with envtest.api_client() as api:
        clock = Clock()
        a, b = elector(api, envtest_ns, "a", clock), elector(api, envtest_ns, "b", clock)
        assert a.try_once()
        in_flight, done = InFlight(), threading.Event()
        running = threading.Event()

        def reconcile() -> None:
            with in_flight.running(f"job {envtest_ns}/slow"):
                running.set()
                done.wait(30)

        threading.Thread(target=reconcile, daemon=True).start()
        assert running.wait(10)

        async def scenario() -> None:
            closed = asyncio.Event()
            stepping = asyncio.create_task(
                step_down(closed.set, in_flight, lambda: asyncio.to_thread(a.release), timeout=30)
            )
            await asyncio.wait_for(closed.wait(), 10)
            poll_until(lambda: "waiting up to" in caplog.text, timeout=10, what="step_down to say what it waits for")
            assert not await asyncio.to_thread(b.try_once), "the standby led beside a reconcile of the leader"
            done.set()
            await asyncio.wait_for(stepping, 10)

        with caplog.at_level(logging.INFO):
            asyncio.run(scenario())
        assert f"job {envtest_ns}/slow" in caplog.text and "released the Lease" in caplog.text
        assert b.try_once() and b.is_leader()


def test_a_paused_leader_that_resumes_after_its_lease_was_taken_deletes_nothing(
    trainingjob_crd: ControlPlane, envtest_ns: str
) -> None:
    """The leader is paused (SIGSTOP, a long GC) past its lease with a pod's delete decided; the standby takes over
    and replaces that pod under the same name; the old leader resumes: its write is refused before it is sent
    (the fence), and even sent, the UID it names is not the replacement's."""
    with trainingjob_crd.api_client() as api:
        core = client.CoreV1Api(api)
        clock_a, clock_b = Clock(), Clock()
        a, b = elector(api, envtest_ns, "a", clock_a), elector(api, envtest_ns, "b", clock_b)
        assert a.try_once() and not b.try_once()
        pod = {"metadata": {"name": "job-worker-1-1"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
        decided_on = core.create_namespaced_pod(envtest_ns, pod).metadata.uid
        direct = KubernetesCluster(api)
        paused = CachedCluster(direct, Stores(), may_write=a.is_leader)
        clock_a.now += 16  # paused for longer than the lease
        clock_b.now += 16
        assert b.try_once()
        core.delete_namespaced_pod("job-worker-1-1", envtest_ns, grace_period_seconds=0)
        replacement = core.create_namespaced_pod(envtest_ns, pod).metadata.uid
        with pytest.raises(NotLeading):
            paused.delete_pods(envtest_ns, {"job-worker-1-1": decided_on})
        direct.delete_pods(envtest_ns, {"job-worker-1-1": decided_on})  # past the fence: the precondition
        survivor = core.read_namespaced_pod("job-worker-1-1", envtest_ns)
        assert survivor.metadata.uid == replacement and survivor.metadata.deletion_timestamp is None
