"""The operator's own stop (a rolling update's old pod) against the envtest apiserver, a standby beside it: the
leader stops taking work, waits for the reconcile in flight, whose writes still go out under its Lease, and only
then gives the Lease up; the standby cannot lead before, and leads at once after."""

import asyncio
import logging
import threading
import uuid
from typing import Any

import pytest
from kubernetes import client
from testbed.controlplane import ControlPlane
from testbed.processes import poll_until
from tests.support.builders import job_manifest

from trainingjob.kube.client import Connection
from trainingjob.model import GROUP, PLURAL, VERSION
from trainingjob.runtime.controller import Controller
from trainingjob.runtime.leader import LeaderElector
from trainingjob.runtime.metrics import Metrics
from trainingjob.settings import OperatorSettings

pytestmark = pytest.mark.envtest
DEADLINE = 30.0


def _holder(api: client.ApiClient, namespace: str, lease: str) -> str | None:
    found = client.CoordinationV1Api(api).read_namespaced_lease(lease, namespace)
    return found.spec.holder_identity  # type: ignore[no-any-return]


def test_the_lease_goes_only_once_the_reconcile_in_flight_has_written(
    trainingjob_crd: ControlPlane, envtest_ns: str, caplog: pytest.LogCaptureFixture
) -> None:
    lease = f"tj-{uuid.uuid4().hex[:8]}"
    options = OperatorSettings(
        namespace=envtest_ns, lease_namespace=envtest_ns, lease_name=lease, lease_renew_seconds=0.2, metrics_port=0
    )
    entered, leave = threading.Event(), threading.Event()
    with trainingjob_crd.api_client() as api, trainingjob_crd.api_client() as own:
        controller = Controller(options, Connection(own, envtest_ns), Metrics())
        elector = controller.elector
        assert elector is not None
        write_status = controller.jobs.direct.write_status

        def slow_write(*args: Any) -> str:  # the reconcile's first write waits until the test lets it go
            entered.set()
            leave.wait(DEADLINE)
            return write_status(*args)

        controller.jobs.direct.write_status = slow_write  # type: ignore[method-assign, assignment]
        coordination = client.CoordinationV1Api(api)
        standby = LeaderElector(
            coordination, envtest_ns, lease, "standby", lease_seconds=options.lease_duration_seconds
        )

        async def scenario() -> None:
            await controller.start()
            client.CustomObjectsApi(api).create_namespaced_custom_object(
                GROUP, VERSION, envtest_ns, PLURAL, job_manifest("slow")
            )
            assert await asyncio.to_thread(entered.wait, DEADLINE), "the job's reconcile never wrote"
            stopping = asyncio.create_task(controller.stop())
            await asyncio.to_thread(
                poll_until, lambda: "waiting up to" in caplog.text, timeout=DEADLINE, what="the stop to wait"
            )
            assert _holder(api, envtest_ns, lease) == elector.identity, "the Lease went mid-reconcile"
            assert not await asyncio.to_thread(standby.try_once), "the standby led beside the leader's reconcile"
            leave.set()
            await asyncio.wait_for(stopping, DEADLINE)

        with caplog.at_level(logging.INFO):
            asyncio.run(scenario())
        assert standby.try_once() and _holder(api, envtest_ns, lease) == "standby"  # at once: it was released
        job = client.CustomObjectsApi(api).get_namespaced_custom_object(GROUP, VERSION, envtest_ns, PLURAL, "slow")
        assert job.get("status"), "the reconcile in flight did not write its status under the Lease"
    assert f"job {envtest_ns}/slow" in caplog.text
