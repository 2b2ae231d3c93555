"""Admission is the truth: for random TrainingJobs (tests/support/strategies_trainingjob.py) pydantic and the real
apiserver give the same verdict, and every pod and Service the operator would create for an accepted job passes
the apiserver's own validation (a server-side dry run). A job the schema accepts never fails only at runtime."""

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, seed, settings
from kubernetes import client
from pydantic import ValidationError
from testbed.controlplane import ControlPlane
from testbed.crds import install_crd
from tests.support.admission import dry_run_refusals
from tests.support.strategies_trainingjob import PRIORITY_CLASSES, RUNTIME_CLASSES, SERVICE_ACCOUNTS, trainingjobs

from trainingjob.children.specs import access_manifests, pod_manifest, replicas, service_manifest
from trainingjob.model import GROUP, PLURAL, VERSION, TrainingJob

pytestmark = pytest.mark.envtest

EXAMPLES = int(os.environ.get("TJ_ADMISSION_EXAMPLES", "300"))
SEED = int(os.environ.get("TJ_ADMISSION_SEED", "20261122"))
UID = "0f0e0d0c-0b0a-0908-0706-050403020100"


class Apiserver:
    """Dry runs in one namespace of the envtest apiserver."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.api, self.namespace = api, namespace
        self.jobs = client.CustomObjectsApi(api)

    def job(self, manifest: dict[str, Any]) -> str | None:
        """None when the apiserver would store the job, else why not."""
        return self._verdict(
            lambda: self.jobs.create_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, manifest, dry_run="All", field_validation="Strict"
            )
        )

    def children(self, job: TrainingJob) -> list[str]:
        """What the apiserver says against each child the operator would create; [] when all pass."""
        children = [service_manifest(job, UID), *access_manifests(job, UID, "tj-system", True)]
        children += [pod_manifest(job, UID, replica, 1) for replica in replicas(job)]
        refused = dry_run_refusals(self.api, self.namespace, children)
        return [f"{child['kind']} {child['metadata']['name']}: {said}" for child, said in refused]

    @staticmethod
    def _verdict(call: Any) -> str | None:
        try:
            call()
        except client.ApiException as error:
            if error.status not in (400, 403, 422):  # 403: refused by an admission plugin
                raise
            return str(json.loads(error.body).get("message", error.body))
        return None


@pytest.fixture(scope="module")
def apiserver(envtest: ControlPlane) -> Iterator[Apiserver]:
    with envtest.api_client() as api:
        install_crd(api)
        namespace = "admission-property"
        core = client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": namespace}})
        for account in SERVICE_ACCOUNTS:
            core.create_namespaced_service_account(namespace, {"metadata": {"name": account}})
        scheduling = client.SchedulingV1Api(api)
        for value, name in enumerate(PRIORITY_CLASSES):
            scheduling.create_priority_class({"metadata": {"name": name}, "value": value})
        node = client.NodeV1Api(api)
        for name in RUNTIME_CLASSES:
            node.create_runtime_class({"metadata": {"name": name}, "handler": name})
        try:
            yield Apiserver(api, namespace)
        finally:
            core.delete_namespace(namespace)
            for name in PRIORITY_CLASSES:
                scheduling.delete_priority_class(name)
            for name in RUNTIME_CLASSES:
                node.delete_runtime_class(name)


def pydantic_verdict(manifest: dict[str, Any]) -> TrainingJob | str:
    try:
        return TrainingJob.from_manifest(manifest | {"metadata": {**manifest["metadata"], "namespace": "ns"}})
    except ValidationError as error:
        return str(error)


def test_pydantic_the_apiserver_and_pod_admission_agree(apiserver: Apiserver) -> None:
    print(f"admission property: TJ_ADMISSION_SEED={SEED}, {EXAMPLES} jobs")

    @seed(SEED)
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(trainingjobs())
    def agree(manifest: dict[str, Any]) -> None:
        parsed, stored = pydantic_verdict(manifest), apiserver.job(manifest)
        assert isinstance(parsed, TrainingJob) == (stored is None), f"pydantic: {parsed}\napiserver: {stored}"
        if isinstance(parsed, TrainingJob):
            assert apiserver.children(parsed) == []

    agree()
