"""A tenant's pods cannot stall the operator for everyone else: eight jobs whose rank 0 drips its progress answer one
header byte at a time (each read runs into its two-second deadline) keep their own progress from being read, but a
job in another namespace is still reconciled within two seconds of its creation. The operator runs with 2 reconcile
slots and a 1 s resync here, so that the eight would hold every slot all the time if a reconcile waited on them."""

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import pytest
from kubernetes import client
from testbed.controlplane import ControlPlane
from testbed.crds import install_crd
from testbed.harness import Harness
from testbed.namespaces import fresh_namespace
from testbed.operator import OperatorProcess, operator_running
from testbed.processes import poll_until
from tests.support.builders import job_manifest

from trainingjob.children.specs import PROGRESS_PORT
from trainingjob.generate import crd
from trainingjob.model import GROUP, PLURAL, VERSION

pytestmark = pytest.mark.cluster
ATTACKERS = 8
VICTIM_SECONDS = 2.0  # the issue's bound; an undefended operator makes the victim wait for the attackers' reads
DRIP_SECONDS = 0.1


@pytest.fixture(scope="module")
def operator(cluster: ControlPlane) -> Iterator[OperatorProcess]:
    """The operator with few slots and a fast resync: a reconcile that waits on a pod would hold a slot often."""
    with cluster.api_client() as api:
        for resource in crd.RESOURCES:
            install_crd(api, resource)
    with operator_running(cluster.kubeconfig, TJ_OPERATOR_WORKERS="2", TJ_OPERATOR_RESYNC_SECONDS="1") as process:
        yield process


class Dripper:
    """Rank 0's progress port answered one header byte every DRIP_SECONDS, without end, until stopped."""

    def __init__(self, address: str, stop: threading.Event) -> None:
        self.listener = socket.create_server((address, PROGRESS_PORT))
        self.stop, self.asked = stop, 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            self.asked += 1
            threading.Thread(target=self._drip, args=(connection,), daemon=True).start()

    def _drip(self, connection: socket.socket) -> None:
        with connection:
            try:
                connection.recv(4096)
                connection.sendall(b"HTTP/1.1 200 OK\r\n")
                while not self.stop.wait(DRIP_SECONDS):
                    connection.sendall(b"X")
            except OSError:
                return

    def close(self) -> None:
        self.listener.close()


@contextmanager
def dripping(addresses: list[str]) -> Iterator[list[Dripper]]:
    stop = threading.Event()
    with ExitStack() as stack:
        drippers = [Dripper(address, stop) for address in addresses]
        for dripper in drippers:
            stack.callback(dripper.close)
        stack.callback(stop.set)
        yield drippers


@pytest.fixture
def victim_ns(cluster: ControlPlane) -> Iterator[str]:
    yield from fresh_namespace(cluster, "victim")


def test_dripping_rank0s_do_not_delay_a_job_in_another_namespace(
    h: Harness, cluster: ControlPlane, victim_ns: str
) -> None:
    for number in range(ATTACKERS):
        h.create(job_manifest(f"drip-{number}", workers=1))
    rank0s = [h.wait_running_pods(f"drip-{number}", 1, attempt=1)[0] for number in range(ATTACKERS)]
    with dripping([pod.status.pod_ip for pod in rank0s]) as drippers:
        poll_until(lambda: all(d.asked >= 2 for d in drippers), timeout=60, what="every rank 0 asked twice")
        with cluster.api_client() as api:
            jobs = client.CustomObjectsApi(api)
            started = time.monotonic()
            jobs.create_namespaced_custom_object(GROUP, VERSION, victim_ns, PLURAL, job_manifest("victim"))

            def reconciled() -> bool:
                found = jobs.get_namespaced_custom_object(GROUP, VERSION, victim_ns, PLURAL, "victim")
                return bool((found.get("status") or {}).get("phase"))

            poll_until(reconciled, timeout=60, interval=0.05, what="the victim's first status")
            waited = time.monotonic() - started
        asked = [d.asked for d in drippers]
    assert waited < VICTIM_SECONDS, f"the victim waited {waited:.1f} s for its first reconcile; ranks 0 asked {asked}"
