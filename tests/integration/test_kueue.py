"""Queued jobs against the real Kueue manager (scripts/build-kueue.sh, testbed/kueue.py) on the cluster tier: the
operator makes each queued job's Workload, Kueue admits it within its ClusterQueue's quota, preempts a lower
priority one for a higher, and the operator suspends, releases and resumes as Kueue expects of a job framework;
spec.suspend deactivates the Workload (its quota goes to the next job), a waiting job's queue can change, and a
job whose queueName is removed runs unqueued. waitForPodsReady: test_kueue_pods_ready.py.

What this tier cannot show is the trainer itself resuming from its checkpoint (kwok's pods run no trainer; the
node tier's suspend tests do): here rank 0's reports stand in for it, and the tests check what the operator does
with them across a preemption: the checkpoint recorded before it, the same checkpoint folder given to the attempt
after it, and the step that attempt resumed from recorded as reported."""

import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from testbed.controlplane import ControlPlane
from testbed.harness import Harness, condition, progress_endpoint
from testbed.kueue import KueueProcess, kueue_running
from testbed.processes import poll_until
from tests.support.kueue_cluster import (  # the fixtures use this module's `kueue`
    FLAVOR_TOLERATION,
    chart_operator,
    finish_gang,
    gang_job,
    h,
    queue,
    queued_reason,
    workload,
    workload_condition,
)

pytestmark = pytest.mark.cluster
Manifest = dict[str, Any]


@pytest.fixture(scope="module")
def kueue(cluster: ControlPlane) -> Iterator[KueueProcess]:
    with tempfile.TemporaryDirectory(prefix="tj-kueue-") as root, kueue_running(cluster, Path(root)) as process:
        yield process


def test_a_clusterqueue_with_quota_for_one_gang_admits_one_job_and_queues_the_next_until_it_ends(
    h: Harness, queue: str
) -> None:
    h.create(gang_job("first", queue, runPolicy={"startupDeadlineSeconds": 60}))
    pods = h.wait_running_pods("first", 2, attempt=1)
    assert all(p.spec.node_selector.get("nvidia.com/gpu.present") == "true" for p in pods)  # the flavor's labels
    assert all(any(t.key == FLAVOR_TOLERATION["key"] for t in p.spec.tolerations or []) for p in pods)
    first = workload(h, "first")
    assert first is not None and workload_condition(first, "Admitted") == "True"
    owner = first["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("TrainingJob", "first", True)
    assert [(s["name"], s["count"]) for s in first["spec"]["podSets"]] == [("worker", 2)]
    assert condition(h.job("first"), "Queued")["reason"] == "Admitted"

    h.create(gang_job("second", queue, runPolicy={"startupDeadlineSeconds": 5}))
    waiting = h.wait("second", lambda j: queued_reason(j) == "WaitingForQuota", "queued for quota")
    assert waiting["status"]["phase"] == "Pending" and queue in condition(waiting, "Queued")["message"]
    held_until = time.monotonic() + 8  # past the second job's startup deadline (5 s): the wait does not count
    while time.monotonic() < held_until:
        held = h.job("second")
        assert held["status"]["phase"] == "Pending" and not h.pods("second"), held["status"]

    finish_gang(h, "first", attempt=1)
    h.wait_phase("first", "Succeeded")
    poll_until(lambda: workload_condition(workload(h, "first"), "Finished") == "True", timeout=30, what="Finished")
    h.wait_running_pods("second", 2, attempt=1, timeout=90)  # the freed quota admits the second
    assert condition(h.job("second"), "Queued")["status"] == "False"


def test_suspending_an_admitted_job_gives_back_its_quota_and_resuming_queues_it_again(h: Harness, queue: str) -> None:
    h.create(gang_job("first", queue))
    h.wait_running_pods("first", 2, attempt=1)
    h.create(gang_job("second", queue))
    h.wait("second", lambda j: queued_reason(j) == "WaitingForQuota", "queued for quota")

    h.patch_spec("first", {"runPolicy": {"suspend": True}})
    h.wait_phase("first", "Suspended")
    h.wait_running_pods("second", 2, attempt=1, timeout=90)  # the first job's quota went to the second
    poll_until(
        lambda: workload_condition(workload(h, "first"), "QuotaReserved") == "False",
        timeout=30,
        what="the suspended job's quota reservation released",  # Kueue counts it free once evicted; this is ours
    )
    first = workload(h, "first")
    assert first is not None and first["spec"]["active"] is False
    assert queued_reason(h.job("first")) == "Suspended"

    h.patch_spec("first", {"runPolicy": {"suspend": False}})
    h.wait("first", lambda j: queued_reason(j) == "WaitingForQuota", "queued again once resumed")
    assert (workload(h, "first") or {})["spec"]["active"] is True and not h.pods("first")
    finish_gang(h, "second", attempt=1)
    h.wait_running_pods("first", 2, attempt=2, timeout=90)  # admitted again: a new attempt


def test_a_waiting_jobs_queue_can_change_and_without_one_it_runs_unqueued(h: Harness, queue: str) -> None:
    for name in ("moved", "unqueued"):  # no such LocalQueue: Kueue leaves their Workloads waiting
        h.create(gang_job(name, "nowhere"))
        h.wait(name, lambda j: queued_reason(j) == "WaitingForQuota", "waiting in a LocalQueue that is not there")

    h.patch_spec("moved", {"scheduling": {"queueName": queue}})
    h.wait_running_pods("moved", 2, attempt=1, timeout=90)  # moved to the queue with quota, and admitted there
    moved = workload(h, "moved")
    assert moved is not None and moved["spec"]["queueName"] == queue
    assert workload_condition(moved, "Admitted") == "True"

    h.patch_spec("unqueued", {"scheduling": {"queueName": None}})
    h.wait_running_pods("unqueued", 2, attempt=1, timeout=90)  # out of Kueue: it runs as an unqueued job
    poll_until(lambda: workload(h, "unqueued") is None, timeout=30, what="the unqueued job's Workload deleted")
    h.wait("unqueued", lambda j: condition(j, "Queued")["reason"] == "Unqueued", "Queued says Unqueued")


@pytest.fixture
def priorities(h: Harness) -> Iterator[tuple[str, str]]:
    """A low and a high PriorityClass for the test's pods (and so their Workloads); removed after the test."""
    scheduling = client.SchedulingV1Api(h.core.api_client)
    names = (f"low-{h.ns}"[:63], f"high-{h.ns}"[:63])
    for name, value in zip(names, (100, 1000), strict=True):
        scheduling.create_priority_class({"metadata": {"name": name}, "value": value})
    try:
        yield names
    finally:
        for name in names:
            scheduling.delete_priority_class(name)


def test_a_higher_priority_job_preempts_a_lower_one_which_resumes_from_its_checkpoint_later(
    h: Harness, queue: str, priorities: tuple[str, str]
) -> None:
    low, high = priorities
    h.create(gang_job("low", queue, scheduling={"priorityClassName": low}))
    rank0, _ = h.wait_running_pods("low", 2, attempt=1)
    report = {"step": 45, "heartbeat": time.time(), "totalSteps": 100, "lastCheckpointStep": 40,
              "lastCheckpointPath": "/checkpoints/step-40", "lastCheckpointTime": time.time()}  # fmt: skip
    with progress_endpoint(rank0.status.pod_ip, report):
        h.wait("low", lambda j: (j["status"].get("progress") or {}).get("step") == 45, "progress read")
        h.create(gang_job("high", queue, scheduling={"priorityClassName": high}))
        suspended = h.wait_phase("low", "Suspended", timeout=60)
    assert condition(suspended, "Suspended")["reason"] == "Preempted"
    assert queued_reason(suspended) == "Preempted"
    checkpoint_dir = _env(rank0, "TJ_CHECKPOINT_DIR")
    poll_until(lambda: not h.pods("low"), timeout=30, what="the preempted job's pods to go")
    h.wait_running_pods("high", 2, attempt=1, timeout=60)  # admitted once the low job released its quota
    assert workload_condition(workload(h, "low"), "QuotaReserved") == "False"

    finish_gang(h, "high", attempt=1)
    h.wait_phase("high", "Succeeded")
    rank0, _ = h.wait_running_pods("low", 2, attempt=2, timeout=90)  # re-admitted: a new attempt
    assert _env(rank0, "TJ_CHECKPOINT_DIR") == checkpoint_dir  # the same folder, with step 40 in it
    h.wait_phase("low", "Running", attempt=2)  # the operator's view of both pods may lag the apiserver's
    resumed = {"step": 41, "heartbeat": time.time(), "totalSteps": 100, "resumedFromStep": 40}
    with progress_endpoint(rank0.status.pod_ip, resumed):
        job = h.wait("low", lambda j: (j["status"].get("progress") or {}).get("resumedFromStep") == 40, "resumed")
    assert job["status"]["phase"] == "Running" and condition(job, "Suspended")["status"] == "False"


def _env(pod: Any, name: str) -> str | None:
    return next((e.value for e in pod.spec.containers[0].env or [] if e.name == name), None)
