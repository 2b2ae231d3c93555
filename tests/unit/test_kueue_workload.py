"""A queued job's Kueue Workload, pure (children/workload.py): the manifest Kueue admits from, what its status says,
and the two status patches the job's controller writes, each as Kueue's own job reconciler writes them."""

from datetime import UTC, datetime
from typing import Any

import pytest
from tests.support.builders import make_job

from trainingjob.children.workload import (
    Placement,
    QueueState,
    finish_patch,
    flavor_names,
    queue_state,
    release_patch,
    workload_manifest,
    workload_name,
)

pytestmark = pytest.mark.fast
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
Manifest = dict[str, Any]


def test_one_pod_set_per_role_with_its_count_and_requests_owned_by_the_job() -> None:
    job = make_job(
        mode="ParameterServer",
        parameterServers={"replicas": 2, "resources": {"requests": {"cpu": "4"}}},
        workers={"replicas": 3, "resources": {"limits": {"nvidia.com/gpu": 2}, "requests": {"cpu": "1"}}},
        scheduling={"queueName": "team-a"},
    )
    found = workload_manifest(job, "0123456789ab", "team-a", ("high", 1000))
    assert found["apiVersion"] == "kueue.x-k8s.io/v1beta2" and found["metadata"]["name"] == "trainingjob-job-01234567"
    owner = found["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("TrainingJob", "0123456789ab", True)
    spec = found["spec"]
    assert (spec["queueName"], spec["priority"], spec["priorityClassRef"]["name"]) == ("team-a", 1000, "high")
    assert [(s["name"], s["count"]) for s in spec["podSets"]] == [("ps", 2), ("worker", 3)]
    requests = [s["template"]["spec"]["containers"][0]["resources"]["requests"] for s in spec["podSets"]]
    assert requests == [{"cpu": "4"}, {"nvidia.com/gpu": "2", "cpu": "1"}]  # limits stand for missing requests
    assert all("schedulingGates" not in s["template"]["spec"] for s in spec["podSets"])
    assert "priority" not in workload_manifest(job, "0123456789ab", "team-a", None)["spec"]


def test_a_namesakes_workload_is_never_taken_and_long_names_fit() -> None:
    assert workload_name("job", "aaaaaaaa-1") != workload_name("job", "bbbbbbbb-1")
    assert len(workload_name("j" * 253, "c" * 36)) <= 253


def _workload(conditions: dict[str, tuple[str, str, str]], admission: Manifest | None = None) -> Manifest:
    listed = [{"type": t, "status": s, "reason": r, "message": m} for t, (s, r, m) in conditions.items()]
    status: Manifest = {"conditions": listed}
    if admission is not None:
        status["admission"] = admission
    return {"metadata": {"name": "wl", "resourceVersion": "7", "generation": 1}, "status": status}


ADMISSION = {
    "clusterQueue": "cq",
    "podSetAssignments": [{"name": "worker", "flavors": {"nvidia.com/gpu": "a100", "cpu": "default"}}],
}
FLAVORS: dict[str, Manifest] = {
    "a100": {"spec": {"nodeLabels": {"gpu": "a100"}, "tolerations": [{"key": "gpu", "operator": "Exists"}]}},
    "default": {"spec": {"nodeLabels": {"zone": "z1"}}},
}
RESERVED = ("True", "QuotaReserved", "Quota reserved in ClusterQueue cq")
ADMITTED = ("True", "Admitted", "The workload is admitted")


@pytest.mark.parametrize(
    ("workload", "expected"),
    [
        (None, QueueState()),
        (
            _workload({"QuotaReserved": ("False", "Pending", "insufficient quota")}),
            QueueState(exists=True, waiting="insufficient quota"),
        ),
        (
            _workload({"QuotaReserved": RESERVED, "Admitted": ADMITTED}, ADMISSION),
            QueueState(
                exists=True,
                admitted=True,
                reserved=True,
                cluster_queue="cq",
                waiting=RESERVED[2],
                placements={
                    "worker": Placement({"gpu": "a100", "zone": "z1"}, ({"key": "gpu", "operator": "Exists"},))
                },
            ),
        ),
        (
            _workload(
                {"QuotaReserved": RESERVED, "Admitted": ADMITTED, "Evicted": ("True", "Preempted", "for a higher")},
                ADMISSION,
            ),
            QueueState(
                exists=True,
                admitted=True,
                reserved=True,
                evicted=("Preempted", "for a higher"),
                cluster_queue="cq",
                waiting=RESERVED[2],
                placements={
                    "worker": Placement({"gpu": "a100", "zone": "z1"}, ({"key": "gpu", "operator": "Exists"},))
                },
            ),
        ),
        (
            _workload({"Finished": ("True", "Succeeded", "done"), "Evicted": ("False", "QuotaReserved", "")}),
            QueueState(exists=True, finished=True),
        ),
    ],
    ids=["none", "pending", "admitted", "evicted", "finished"],
)
def test_what_the_workload_says(workload: Manifest | None, expected: QueueState) -> None:
    assert queue_state(workload, FLAVORS) == expected


def test_the_flavors_an_admission_names_each_once() -> None:
    assignments = [{"name": "worker", "flavors": {"nvidia.com/gpu": "a100", "cpu": "default"}}]
    assignments.append({"name": "ps", "flavors": {"cpu": "default"}})
    both = {"clusterQueue": "cq", "podSetAssignments": assignments}
    assert flavor_names(_workload({}, both)) == ["a100", "default"]


@pytest.mark.parametrize(
    ("reason", "requeued"), [("Preempted", "True"), ("PodsReadyTimeout", "False")], ids=["preempted", "other"]
)
def test_releasing_after_an_eviction_clears_the_reservation_as_kueue_does(reason: str, requeued: str) -> None:
    evicted = _workload(
        {"QuotaReserved": RESERVED, "Admitted": ADMITTED, "Evicted": ("True", reason, "why")}, ADMISSION
    )
    patch = release_patch(evicted, NOW)
    assert patch["metadata"] == {"resourceVersion": "7"} and patch["status"]["admission"] is None
    by_type = {c["type"]: c for c in patch["status"]["conditions"]}
    assert (by_type["QuotaReserved"]["status"], by_type["QuotaReserved"]["reason"]) == ("False", "Pending")
    assert (by_type["Admitted"]["status"], by_type["Admitted"]["reason"]) == ("False", "NoReservation")
    assert (by_type["Requeued"]["status"], by_type["Requeued"]["reason"]) == (requeued, reason)
    assert by_type["Evicted"]["status"] == "True"  # Kueue's to reset, when it admits the Workload again
    assert by_type["QuotaReserved"]["lastTransitionTime"] == "2026-01-02T03:04:05Z"


def test_finishing_sets_finished_with_the_jobs_outcome() -> None:
    patch = finish_patch(_workload({"QuotaReserved": RESERVED}, ADMISSION), False, "2 of 2 workers failed", NOW)
    by_type = {c["type"]: c for c in patch["status"]["conditions"]}
    assert (by_type["Finished"]["status"], by_type["Finished"]["reason"]) == ("True", "Failed")
    assert by_type["Finished"]["message"] == "2 of 2 workers failed" and "admission" not in patch["status"]
