"""Deadlines: activeDeadlineSeconds counts active time only; startupDeadlineSeconds counts each pod from when
it was due, so a worker replaced late in a long run gets its own time."""

from typing import Any

import pytest
from tests.support.builders import at, condition, created_names, make_job, pod, pods_of, step, with_policy, without

from trainingjob.children.naming import Replica
from trainingjob.model import Phase

pytestmark = pytest.mark.fast


def test_active_deadline_fails_a_running_job() -> None:
    job, _ = step(make_job(activeDeadlineSeconds=100), [])
    job, result = step(job, pods_of(job, 1), at(50))
    assert result.requeue_after == pytest.approx(50)
    job, result = step(job, pods_of(job, 1), at(100))
    assert job.status and job.status.phase == Phase.FAILED and condition(job, "Failed").reason == "DeadlineExceeded"
    assert sorted(result.delete) == ["job-worker-0-1", "job-worker-1-1"]


def test_time_suspended_does_not_count_against_the_active_deadline() -> None:
    job, _ = step(make_job(activeDeadlineSeconds=100), [])
    job, _ = step(job, pods_of(job, 1), at(40))
    job, _ = step(with_policy(job, suspend=True), pods_of(job, 1), at(40))
    job, _ = step(job, [], at(1000))
    job, _ = step(with_policy(job, suspend=False), [], at(1000))
    assert job.status and job.status.suspended_seconds == 960 and job.status.phase == Phase.PENDING
    job, result = step(job, pods_of(job, 2), at(1059))
    assert job.status and job.status.phase == Phase.RUNNING and result.requeue_after == pytest.approx(1)
    job, _ = step(job, pods_of(job, 2), at(1060))
    assert job.status and job.status.phase == Phase.FAILED


def test_the_startup_deadline_says_why_the_gang_cannot_start() -> None:
    job, _ = step(make_job(startupDeadlineSeconds=30), [])
    why = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    scheduled = {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": why}]}
    pending = pods_of(job, 1, {"job-worker-1-1": {"phase": "Pending", **scheduled}})
    job, result = step(job, pending, at(10))
    assert job.status and job.status.phase == Phase.PENDING and result.requeue_after == pytest.approx(20)
    assert why in condition(job, "Running").message
    job, _ = step(job, pending, at(30))
    assert job.status and job.status.phase == Phase.FAILED
    failed = condition(job, "Failed")
    assert failed.reason == "StartupDeadlineExceeded" and why in failed.message
    assert job.status.last_failure and job.status.last_failure.pod == "job-worker-1-1"


def test_the_startup_deadline_has_a_default() -> None:
    assert make_job().spec.run_policy.startup_deadline_seconds == 1800


def test_a_ps_worker_replaced_long_after_the_start_gets_its_own_startup_time() -> None:
    job, _ = step(make_job(mode="ParameterServer", workers=2, servers=1, startupDeadlineSeconds=60), [])
    job, _ = step(job, pods_of(job, 1))
    later = at(3600)
    job, _ = step(job, pods_of(job, 1, {"job-worker-1-1": {"phase": "Failed", "exit_code": 75}}), later)
    job, result = step(job, without(pods_of(job, 1), "job-worker-1-1"), at(3600 + 10))
    assert created_names(result) == ["job-worker-1-1"]
    replacement = pod(job, Replica("worker", 1), 1, "Pending", uid="new", created=at(3610))
    job, _ = step(job, [*without(pods_of(job, 1), "job-worker-1-1"), replacement], at(3650))
    assert job.status and job.status.phase == Phase.RUNNING  # it still trains; the Running condition says why
    assert "job-worker-1-1: Pending" in condition(job, "Running").message
    job, _ = step(job, [*without(pods_of(job, 1), "job-worker-1-1"), replacement], at(3670))
    assert job.status and job.status.phase == Phase.FAILED


def _held(job: Any, name: str, gate: str = "kueue.x-k8s.io/admission") -> list[dict[str, Any]]:
    """The job's pods of attempt 1, pod `name` Pending at another controller's scheduling gate."""
    pods = pods_of(job, 1, {name: {"phase": "Pending"}})
    for manifest in pods:
        if manifest["metadata"]["name"] == name:
            manifest["spec"]["schedulingGates"] = [{"name": gate}]
    return pods


def test_time_at_another_controllers_gate_is_not_startup_time() -> None:
    """A pod a queue holds at its own gate for an hour: Queued says so, no deadline counts the hour, and the startup
    deadline counts from when the operator saw the gate lifted."""
    job, _ = step(make_job(startupDeadlineSeconds=30), [])
    job, result = step(job, _held(job, "job-worker-1-1"), at(3600))
    assert job.status and job.status.phase == Phase.PENDING
    queued = condition(job, "Queued")
    assert (queued.status, queued.reason) == ("True", "HeldBySchedulingGate")
    assert "job-worker-1-1" in queued.message and "kueue.x-k8s.io/admission" in queued.message
    assert "waits for scheduling gate kueue.x-k8s.io/admission" in condition(job, "Running").message
    pending = pods_of(job, 1, {"job-worker-1-1": {"phase": "Pending"}})
    job, _ = step(job, pending, at(3610))
    queued = condition(job, "Queued")
    assert (queued.status, queued.reason, queued.last_transition_time) == ("False", "SchedulingGatesLifted", at(3610))
    job, result = step(job, pending, at(3630))
    assert job.status and job.status.phase == Phase.PENDING and result.requeue_after == pytest.approx(10)
    job, _ = step(job, pending, at(3640))
    assert job.status and job.status.phase == Phase.FAILED
    assert condition(job, "Failed").reason == "StartupDeadlineExceeded"


def test_our_own_tracking_gate_is_not_another_controllers() -> None:
    job, _ = step(make_job(startupDeadlineSeconds=30), [])
    job, _ = step(job, _held(job, "job-worker-1-1", "trainingjob.io/tracked"), at(10))
    assert condition(job, "Queued") is None


UNPLACED = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes are available"}


@pytest.mark.parametrize(
    ("min_replicas", "waiting", "fields", "phase"),
    [
        pytest.param(2, "job-worker-3-1", {"conditions": [UNPLACED]}, Phase.RUNNING, id="beyond-min-waits-for-room"),
        pytest.param(2, "job-worker-1-1", {"conditions": [UNPLACED]}, Phase.FAILED, id="below-min-counts"),
        pytest.param(2, "job-worker-3-1", {"node": "n1"}, Phase.FAILED, id="placed-but-not-starting-counts"),
        pytest.param(None, "job-worker-3-1", {"conditions": [UNPLACED]}, Phase.FAILED, id="without-min-counts"),
    ],
)
def test_a_ps_jobs_workers_beyond_min_replicas_wait_for_room_without_a_deadline(
    min_replicas: int | None, waiting: str, fields: dict[str, Any], phase: Phase
) -> None:
    workers: dict[str, Any] = {"replicas": 4} | ({"minReplicas": min_replicas} if min_replicas else {})
    job = make_job(mode="ParameterServer", workers=workers, servers=1, startupDeadlineSeconds=60)
    job, _ = step(job, [])
    pods = pods_of(job, 1, {waiting: {"phase": "Pending", **fields}})
    job, _ = step(job, pods, at(10))
    job, _ = step(job, pods, at(3600))
    assert job.status and job.status.phase == phase
    scale = job.status.scale
    if phase == Phase.RUNNING:
        assert scale and scale.reason == "WaitingForCapacity" and waiting in scale.message, scale
    else:
        assert condition(job, "Failed").reason == "StartupDeadlineExceeded"
