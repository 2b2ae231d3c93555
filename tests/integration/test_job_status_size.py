"""A job's bookkeeping at its largest, through a real kube-apiserver: every pod of the largest job the model allows
(4,096 workers and 256 parameter servers, a name of 40 characters, attempt 999) tracked with every field set, as the
operator writes it (a merge patch of the status). The apiserver takes it, its managed fields hold the list once (not
one entry per pod), and the stored object stays under the bound the README states."""

import json
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client
from testbed.controlplane import ControlPlane
from tests.support.builders import T0, job_manifest

from trainingjob.children.contract import ROLE_PS, ROLE_WORKER
from trainingjob.children.naming import Replica
from trainingjob.kube.resources import Resources
from trainingjob.kube.writes import Pacer
from trainingjob.model import GROUP, PLURAL, VERSION, TrainingJobStatus
from trainingjob.model.job import MAX_NAME_LENGTH
from trainingjob.model.status import PodOutcome, TrackedPod

pytestmark = pytest.mark.envtest
WORKERS, SERVERS, ATTEMPT = 4096, 256, 999
TRACKED_BOUND_BYTES = 900_000  # README, "Status at scale": the stored job with every pod tracked, every field set
MANAGED_FIELDS_BOUND_BYTES = 4_096


def _tracked(name: str) -> list[TrackedPod]:
    slots = [Replica(ROLE_WORKER, i) for i in range(WORKERS)] + [Replica(ROLE_PS, i) for i in range(SERVERS)]
    return [
        TrackedPod(
            name=slot.pod_name(name, ATTEMPT),
            uid=str(uuid.uuid4()),
            outcome=PodOutcome.FAILED,
            incarnation=99,
            restarting_since=T0,
        )
        for slot in slots
    ]


@pytest.fixture
def api(trainingjob_crd: ControlPlane) -> Iterator[client.ApiClient]:
    with trainingjob_crd.api_client() as api:
        yield api


def test_every_pod_of_the_largest_job_tracked_fits_with_room(api: client.ApiClient, envtest_ns: str) -> None:
    custom = client.CustomObjectsApi(api)
    name = "j" * MAX_NAME_LENGTH
    manifest = job_manifest(name, mode="ParameterServer", workers=WORKERS, servers=SERVERS)
    created = custom.create_namespaced_custom_object(GROUP, VERSION, envtest_ns, PLURAL, manifest)
    status = TrainingJobStatus(attempt=ATTEMPT, tracked_pods=_tracked(name))
    patch = status.model_dump(mode="json", by_alias=True, exclude_none=True)
    Resources(api, pacer=Pacer(4)).write_status(PLURAL, envtest_ns, name, created["metadata"]["resourceVersion"], patch)
    stored = custom.get_namespaced_custom_object(GROUP, VERSION, envtest_ns, PLURAL, name)
    assert len(stored["status"]["trackedPods"]) == WORKERS + SERVERS
    assert TrainingJobStatus.model_validate(stored["status"], by_alias=True).tracked_pods == status.tracked_pods
    managed = json.dumps(stored["metadata"]["managedFields"], separators=(",", ":"))
    assert len(managed) < MANAGED_FIELDS_BOUND_BYTES, "managed fields grow with the tracked pods"
    assert len(json.dumps(stored, separators=(",", ":"))) < TRACKED_BOUND_BYTES
