"""Kueue's hold on a queued job (plan/queue.py through suspend.decide): no pods until the Workload is admitted,
the condition Queued naming the queue, no startup deadline while it waits, pods placed by the admission's flavors,
a suspension with a checkpoint on eviction, the quota released once the pods are gone, Finished when the job
ends."""

from typing import Any

import pytest
from tests.support.builders import at, condition, created_names, make_job, pods_of, step

from trainingjob.children.workload import Act, Placement, QueueState, WorkloadAction
from trainingjob.model import Phase, TrainingJob

pytestmark = pytest.mark.fast

NOT_YET = QueueState(
    exists=True, queue="team-a", waiting="insufficient quota for nvidia.com/gpu in flavor gpu, 16 more needed"
)
GPU_NODES = Placement({"pool": "gpu"}, ({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},))
ADMITTED = QueueState(
    exists=True, queue="team-a", admitted=True, reserved=True, cluster_queue="cq", placements={"worker": GPU_NODES}
)
PREEMPTED = QueueState(
    exists=True,
    queue="team-a",
    admitted=True,
    reserved=True,
    cluster_queue="cq",
    evicted=("Preempted", "Preempted to accommodate a workload (UID: u) due to prioritization in the ClusterQueue"),
)
RELEASED = QueueState(exists=True, queue="team-a", evicted=PREEMPTED.evicted)


def queued_job(**spec: Any) -> TrainingJob:
    return make_job(scheduling={"queueName": "team-a"}, **spec)


@pytest.mark.parametrize(
    ("state", "reason", "said", "workload"),
    [
        (QueueState(), "WaitingForQuota", "Waiting in LocalQueue team-a", WorkloadAction(Act.CREATE)),
        (NOT_YET, "WaitingForQuota", "insufficient quota", None),
        (QueueState(served=False), "KueueNotInstalled", "serves no Kueue Workloads", None),
    ],
    ids=["no-workload-yet", "not-admitted", "no-kueue"],
)
def test_a_queued_job_makes_no_pods_until_admitted(
    state: QueueState, reason: str, said: str, workload: WorkloadAction | None
) -> None:
    job, result = step(queued_job(), [], queue=state)
    assert not result.create and job.status and job.status.phase == Phase.PENDING and job.status.attempt == 0
    queued = condition(job, "Queued")
    assert (queued.status, queued.reason) == ("True", reason) and said in queued.message
    assert result.workload == workload
    assert result.requeue_after is not None and result.requeue_after <= 5  # no watch on Workloads: it looks again


def test_the_time_queued_does_not_count_against_the_startup_deadline() -> None:
    job, _ = step(queued_job(startupDeadlineSeconds=60), [], queue=NOT_YET)
    job, result = step(job, [], at(3600), queue=NOT_YET)
    assert job.status and job.status.phase == Phase.PENDING and not result.events
    job, result = step(job, [], at(3601), queue=ADMITTED)
    assert job.status and job.status.phase == Phase.PENDING and len(created_names(result)) == 2
    fresh = {name: {"created": at(3601)} for name in created_names(result)}
    job, _ = step(job, pods_of(job, 1, fresh, phase="Pending"), at(3650), queue=ADMITTED)
    assert job.status and job.status.phase == Phase.PENDING  # counted from the pods' creation: 49 s of 60
    job, _ = step(job, pods_of(job, 1, fresh, phase="Pending"), at(3662), queue=ADMITTED)
    assert job.status and job.status.phase == Phase.FAILED  # and it still counts, from there


def test_admitted_pods_go_where_the_flavors_say_and_queued_turns_false() -> None:
    job, _ = step(queued_job(), [], queue=NOT_YET)
    job, result = step(job, [], at(1), queue=ADMITTED)
    pods = [m for m in result.create if m["kind"] == "Pod"]
    assert len(pods) == 2 and all(p["spec"]["nodeSelector"] == {"pool": "gpu"} for p in pods)
    assert all(p["spec"]["tolerations"] == list(GPU_NODES.tolerations) for p in pods)
    queued = condition(job, "Queued")
    assert (queued.status, queued.reason, queued.message) == ("False", "Admitted", "Admitted by ClusterQueue cq.")
    assert result.workload is None
    _, result = step(job, pods_of(job, 1), at(2), queue=ADMITTED)
    assert result.requeue_after is not None and result.requeue_after <= 15  # an eviction is seen within 15 s


def test_an_unqueued_or_unconsulted_job_is_not_held() -> None:
    _, result = step(queued_job(), [])  # no Kueue consulted (local mode): the queue name changes nothing
    assert len(created_names(result)) == 2 and result.workload is None
    job, result = step(make_job(), [], queue=NOT_YET)
    assert len(created_names(result)) == 2 and condition(job, "Queued") is None


def test_an_evicted_job_is_suspended_releases_its_quota_once_its_pods_are_gone_and_resumes_when_readmitted() -> None:
    job, _ = step(queued_job(), [], queue=ADMITTED)
    job, _ = step(job, pods_of(job, 1), at(1), queue=ADMITTED)
    assert job.status and job.status.phase == Phase.RUNNING
    job, result = step(job, pods_of(job, 1), at(2), queue=PREEMPTED)
    assert job.status and job.status.phase == Phase.SUSPENDED
    assert sorted(result.delete) == ["job-worker-0-1", "job-worker-1-1"]  # SIGTERM: the trainer checkpoints
    assert condition(job, "Suspended").reason == "Preempted" and condition(job, "Queued").status == "True"
    assert result.workload is None  # the pods still hold their nodes: the quota is not released yet
    going = pods_of(job, 1, {n: {"deleting": at(2)} for n in result.delete})
    job, result = step(job, going, at(3), queue=PREEMPTED)
    assert result.workload is None and not result.delete
    job, result = step(job, [], at(4), queue=PREEMPTED)
    assert result.workload == WorkloadAction(Act.RELEASE) and job.status and job.status.phase == Phase.SUSPENDED
    job, result = step(job, [], at(5), queue=RELEASED)
    assert result.workload is None and not result.create
    job, result = step(job, [], at(9), queue=ADMITTED)
    assert job.status and job.status.attempt == 2 and created_names(result) == ["job-worker-0-2", "job-worker-1-2"]
    assert condition(job, "Suspended").status == "False" and condition(job, "Queued").status == "False"


@pytest.mark.parametrize(("exit_code", "succeeded"), [(0, True), (1, False)], ids=["succeeded", "failed"])
def test_an_ended_job_marks_its_workload_finished_once(exit_code: int, succeeded: bool) -> None:
    job, _ = step(queued_job(backoffLimit=0), [], queue=ADMITTED)
    job, _ = step(job, pods_of(job, 1), at(1), queue=ADMITTED)
    ended = {n: {"phase": "Succeeded" if exit_code == 0 else "Failed", "exit_code": exit_code} for n in
             ("job-worker-0-1", "job-worker-1-1")}  # fmt: skip
    job, result = step(job, pods_of(job, 1, ended), at(2), queue=ADMITTED)
    assert job.status and job.status.phase == (Phase.SUCCEEDED if succeeded else Phase.FAILED)
    assert result.workload is not None and (result.workload.act, result.workload.succeeded) == (Act.FINISH, succeeded)
    done = QueueState(exists=True, queue="team-a", admitted=True, reserved=True, finished=True)
    _, result = step(job, pods_of(job, 1, ended), at(3), queue=done)
    assert result.workload is None
