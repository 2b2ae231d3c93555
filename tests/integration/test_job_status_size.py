"""A job's bookkeeping at its largest, through a real kube-apiserver, written as the operator writes it (a merge
patch of the status), the name 40 characters long and the attempt 999:

- a DDP gang of 10,240 workers, every pod running (recorded as name ranges), and as many slots as the operator
  handles at once (plan/refused.py MOST_SLOTS) refused by their nodes, each with its counted record and its
  backoff, the nodes' names 63 characters long;
- a ParameterServer job of 4,096 workers and 256 parameter servers with every pod's record whole and every field
  set (failed, restarted in place: records a name range cannot hold).

The apiserver takes each, its managed fields hold the lists once (not one entry per pod), the status reads back
as written, and the stored object stays under the bound the README states ("Status at scale")."""

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client
from testbed.controlplane import ControlPlane
from tests.support.builders import T0, job_manifest

from trainingjob.children.contract import ROLE_PS, ROLE_WORKER
from trainingjob.children.naming import Replica
from trainingjob.kube.resources import Resources
from trainingjob.kube.writes import Pacer
from trainingjob.model import GROUP, PLURAL, VERSION, NodeRefusal, SlotBackoff, TrainingJobStatus
from trainingjob.model.job import MAX_NAME_LENGTH
from trainingjob.model.roles import MAX_PARAMETER_SERVERS, MAX_PS_WORKERS, MAX_WORKERS
from trainingjob.model.status import PodOutcome, TrackedPod
from trainingjob.plan.refused import MOST_SLOTS

pytestmark = pytest.mark.envtest
ATTEMPT = 999
NAME = "j" * MAX_NAME_LENGTH
DDP_BOUND_BYTES = 300_000  # README, "Status at scale"
PS_BOUND_BYTES = 900_000
MANAGED_FIELDS_BOUND_BYTES = 4_096


def _ddp_gang() -> TrainingJobStatus:
    names = [Replica(ROLE_WORKER, i).pod_name(NAME, ATTEMPT) for i in range(MAX_WORKERS)]
    refused = set(names[:: MAX_WORKERS // MOST_SLOTS][:MOST_SLOTS])
    tracked = [
        TrackedPod(name=n, uid=str(uuid.uuid4()), outcome=PodOutcome.FAILED if n in refused else None) for n in names
    ]
    refusal = NodeRefusal(since=T0, count=99, node="n" * 63, reason="UnexpectedAdmissionError")
    slots = [SlotBackoff(pod=n, not_before=T0, failures=99, refused=refusal) for n in sorted(refused)]
    return TrainingJobStatus(attempt=ATTEMPT, tracked_pods=tracked, replacements=slots)


def _ps_job() -> TrainingJobStatus:
    slots = [Replica(ROLE_WORKER, i) for i in range(MAX_PS_WORKERS)]
    slots += [Replica(ROLE_PS, i) for i in range(MAX_PARAMETER_SERVERS)]
    tracked = [
        TrackedPod(
            name=slot.pod_name(NAME, ATTEMPT),
            uid=str(uuid.uuid4()),
            outcome=PodOutcome.FAILED,
            incarnation=99,
            restarting_since=T0,
        )
        for slot in slots
    ]
    return TrainingJobStatus(attempt=ATTEMPT, tracked_pods=tracked)


CASES = {
    "ddp-10240-workers-512-refused": ({"workers": MAX_WORKERS}, _ddp_gang, DDP_BOUND_BYTES),
    "ps-4096-workers-every-field": (
        {"mode": "ParameterServer", "workers": MAX_PS_WORKERS, "servers": MAX_PARAMETER_SERVERS},
        _ps_job,
        PS_BOUND_BYTES,
    ),
}


@pytest.fixture
def api(trainingjob_crd: ControlPlane) -> Iterator[client.ApiClient]:
    with trainingjob_crd.api_client() as api:
        yield api


@pytest.mark.parametrize(("spec", "status_of", "bound"), list(CASES.values()), ids=list(CASES))
def test_the_largest_jobs_bookkeeping_fits_with_room(
    api: client.ApiClient,
    envtest_ns: str,
    spec: dict[str, Any],
    status_of: Callable[[], TrainingJobStatus],
    bound: int,
) -> None:
    custom = client.CustomObjectsApi(api)
    created = custom.create_namespaced_custom_object(GROUP, VERSION, envtest_ns, PLURAL, job_manifest(NAME, **spec))
    status = status_of()
    patch = status.model_dump(mode="json", by_alias=True, exclude_none=True)
    Resources(api, pacer=Pacer(4)).write_status(PLURAL, envtest_ns, NAME, created["metadata"]["resourceVersion"], patch)
    stored = custom.get_namespaced_custom_object(GROUP, VERSION, envtest_ns, PLURAL, NAME)
    read = TrainingJobStatus.model_validate(stored["status"])
    assert sorted((t.name, t.outcome) for t in read.tracked_pods) == sorted(
        (t.name, t.outcome) for t in status.tracked_pods
    )
    assert read.replacements == status.replacements
    managed = json.dumps(stored["metadata"]["managedFields"], separators=(",", ":"))
    assert len(managed) < MANAGED_FIELDS_BOUND_BYTES, "managed fields grow with the tracked pods"
    size = len(json.dumps(stored, separators=(",", ":")))
    print(f"stored job: {size:,} bytes")
    assert size < bound
