"""Every write of our own resources (a job's or sweep's status, a trial's suspension, a delete) goes through the
shared write pace, where a 429 is waited out as its Retry-After asks, against the envtest apiserver."""

from collections.abc import Callable
from typing import TypeVar

import pytest
from kubernetes import client
from testbed.controlplane import ControlPlane
from tests.support.builders import job_manifest

from trainingjob.kube.resources import Resources
from trainingjob.kube.writes import Pacer
from trainingjob.model import GROUP, PLURAL, VERSION

pytestmark = pytest.mark.envtest
R = TypeVar("R")


class CountingPacer(Pacer):
    def __init__(self) -> None:
        super().__init__(4)
        self.calls = 0

    def call(self, write: Callable[[], R], *, deadline: float = 60.0) -> R:
        self.calls += 1
        return super().call(write, deadline=deadline)


def test_status_writes_patches_and_deletes_are_paced(trainingjob_crd: ControlPlane, envtest_ns: str) -> None:
    with trainingjob_crd.api_client() as api:
        custom, pacer = client.CustomObjectsApi(api), CountingPacer()
        job = custom.create_namespaced_custom_object(GROUP, VERSION, envtest_ns, PLURAL, job_manifest("paced"))
        resources = Resources(api, pacer=pacer)
        version = resources.write_status(
            PLURAL, envtest_ns, "paced", job["metadata"]["resourceVersion"], {"phase": "Pending"}
        )
        assert version and pacer.calls == 1
        resources.merge_patch(PLURAL, envtest_ns, "paced", {"spec": {"runPolicy": {"suspend": True}}})
        assert pacer.calls == 2
        resources.delete(PLURAL, envtest_ns, "paced", job["metadata"]["uid"])
        assert pacer.calls == 3
