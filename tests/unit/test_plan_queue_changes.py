"""A queued job whose spec changes under Kueue (plan/queue.py, plan/pods_ready.py): spec.suspend deactivates its
Workload (Kueue evicts it and the quota is released once the pods are gone; resumed, it is activated and queues
again), a changed scheduling.queueName moves a Workload that reserves no quota (an admitted one stays, and
Queued says so), a removed one deletes the Workload and the job runs unqueued, and PodsReady follows the
attempt's pods for Kueue's waitForPodsReady, written only when it changes."""

from dataclasses import replace
from typing import Any

import pytest
from tests.support.builders import at, condition, created_names, make_job, pods_of, step, with_policy

from trainingjob.children.workload import Act, QueueState, WorkloadAction, workload_manifest
from trainingjob.model import Phase, TrainingJob
from trainingjob.plan import queue

pytestmark = pytest.mark.fast

WAITING = QueueState(exists=True, queue="team-a", waiting="insufficient quota")
ADMITTED = QueueState(exists=True, queue="team-a", admitted=True, reserved=True, cluster_queue="cq")
UP = replace(ADMITTED, pods_ready=(True, "Started"))  # its pods all up, as the Workload already says
DEACTIVATED = ("Deactivated", "The workload is deactivated")


def queued_job(queue_name: str | None = "team-a", **spec: Any) -> TrainingJob:
    return make_job(scheduling={"queueName": queue_name} if queue_name else {}, **spec)


def with_queue(job: TrainingJob, name: str | None) -> TrainingJob:
    """The job with scheduling.queueName changed (or removed), as a user's edit would."""
    scheduling = job.spec.scheduling.model_copy(update={"queue_name": name}) if job.spec.scheduling else None
    return job.model_copy(update={"spec": job.spec.model_copy(update={"scheduling": scheduling})})


def running_queued() -> TrainingJob:
    job, _ = step(queued_job(), [], queue=ADMITTED)
    job, _ = step(job, pods_of(job, 1), at(1), queue=ADMITTED)
    assert job.status and job.status.phase == Phase.RUNNING
    return job


@pytest.mark.parametrize(
    ("suspend", "state", "pods", "act"),
    [
        (True, ADMITTED, True, Act.DEACTIVATE),
        (True, WAITING, False, Act.DEACTIVATE),
        (True, replace(ADMITTED, active=False, evicted=DEACTIVATED), True, None),
        (True, replace(ADMITTED, active=False, evicted=DEACTIVATED), False, Act.RELEASE),
        (True, replace(WAITING, active=False, evicted=DEACTIVATED), False, None),
        (False, replace(WAITING, active=False, evicted=DEACTIVATED), False, Act.ACTIVATE),
        (False, replace(WAITING, queue="team-b"), False, Act.MOVE),
        (False, replace(UP, queue="team-b"), True, None),
        (False, replace(WAITING, queue="team-b", evicted=("Preempted", "")), False, Act.MOVE),
        (False, WAITING, False, None),
    ],
    ids=[
        "suspended-admitted",
        "suspended-waiting",
        "deactivated-pods-stopping",
        "deactivated-pods-gone",
        "deactivated-holds-nothing",
        "resumed",
        "queue-changed-while-waiting",
        "queue-changed-once-admitted",
        "queue-changed-after-eviction-released",
        "nothing-to-change",
    ],
)
def test_the_workload_follows_the_jobs_spec(suspend: bool, state: QueueState, pods: bool, act: Act | None) -> None:
    job = with_policy(running_queued(), suspend=suspend)
    _, result = step(job, pods_of(job, 1) if pods else [], at(2), queue=state)
    assert (result.workload.act if result.workload else None) == act


def test_a_suspended_admitted_job_gives_back_its_quota_and_queues_again_when_resumed() -> None:
    job = with_policy(running_queued(), suspend=True)
    job, result = step(job, pods_of(job, 1), at(2), queue=ADMITTED)
    assert job.status and job.status.phase == Phase.SUSPENDED and len(result.delete) == 2
    assert result.workload == WorkloadAction(Act.DEACTIVATE)
    assert result.requeue_after is not None  # Kueue's eviction is read again: no watch on Workloads
    evicted = replace(ADMITTED, active=False, evicted=DEACTIVATED)
    job, result = step(job, [], at(3), queue=evicted)
    assert result.workload == WorkloadAction(Act.RELEASE)
    assert condition(job, "Queued").reason == "Suspended" and "deactivated" in condition(job, "Queued").message
    released = replace(WAITING, active=False, evicted=DEACTIVATED, waiting="")
    job, result = step(job, [], at(4), queue=released)
    assert result.workload is None and result.requeue_after is None  # settled: nothing held, nothing to do
    job, result = step(with_policy(job, suspend=False), [], at(5), queue=released)
    assert result.workload == WorkloadAction(Act.ACTIVATE) and not result.create
    assert job.status and job.status.phase == Phase.SUSPENDED
    assert condition(job, "Queued").reason == "Activating" and result.requeue_after  # read back, then waiting
    job, result = step(job, [], at(6), queue=replace(released, active=True))
    assert result.workload is None and not result.create and job.status and job.status.phase == Phase.SUSPENDED
    assert condition(job, "Queued").reason == "WaitingForQuota"
    job, result = step(job, [], at(7), queue=ADMITTED)
    assert job.status and job.status.attempt == 2 and len(created_names(result)) == 2


def test_a_job_made_suspended_gets_an_inactive_workload() -> None:
    job = queued_job(suspend=True)
    _, result = step(job, [], queue=QueueState())
    assert result.workload == WorkloadAction(Act.CREATE)
    assert workload_manifest(job, "u", "team-a", None)["spec"]["active"] is False
    assert "active" not in workload_manifest(queued_job(), "u", "team-a", None)["spec"]


def test_an_admitted_job_whose_queue_changes_stays_and_says_so() -> None:
    job = with_queue(running_queued(), "team-b")
    job, result = step(job, pods_of(job, 1), at(2), queue=UP)
    queued = condition(job, "Queued")
    assert queued.reason == "Admitted" and "team-b" in queued.message and "stays in LocalQueue team-a" in queued.message
    assert result.workload is None and job.status and job.status.phase == Phase.RUNNING


def test_a_waiting_job_whose_queue_is_removed_deletes_its_workload_and_runs_unqueued() -> None:
    job, _ = step(queued_job(), [], queue=WAITING)
    job = with_queue(job, None)
    assert queue.consulted(job)  # it named a queue: its Workload is read
    job, result = step(job, [], at(1), queue=WAITING)
    assert result.workload == WorkloadAction(Act.LEAVE) and len(created_names(result)) == 2
    assert condition(job, "Queued").reason == "Unqueuing"
    job, result = step(job, pods_of(job, 1), at(2), queue=QueueState())
    assert result.workload is None and condition(job, "Queued").reason == "Unqueued"
    assert not queue.consulted(job)  # gone: no more reads
    assert not queue.consulted(make_job())


pods_ready_cases = [
    ("admitted-none-up-no-condition", ADMITTED, "Pending", None, None),
    ("admitted-all-up", ADMITTED, "Running", None, (True, "Started")),
    ("all-up-already-said", ADMITTED, "Running", (True, "Started"), None),
    ("one-lost-after-start", ADMITTED, "Pending", (True, "Started"), (False, "WaitForRecovery")),
    ("recovered", ADMITTED, "Running", (False, "WaitForRecovery"), (True, "Recovered")),
    ("not-up-still-waiting", ADMITTED, "Pending", (False, "WaitForStart"), None),
    ("evicted", replace(ADMITTED, evicted=("Preempted", "")), "Running", (True, "Started"), (False, "WaitForStart")),
    ("not-admitted", WAITING, "Pending", (True, "Started"), (False, "WaitForStart")),
]


@pytest.mark.parametrize(
    ("state", "phase", "before", "written"),
    [case[1:] for case in pods_ready_cases],
    ids=[case[0] for case in pods_ready_cases],
)
def test_pods_ready_follows_the_attempts_pods_and_is_written_only_on_change(
    state: QueueState, phase: str, before: tuple[bool, str] | None, written: tuple[bool, str] | None
) -> None:
    job = running_queued()
    _, result = step(job, pods_of(job, 1, phase=phase), at(2), queue=replace(state, pods_ready=before))
    ready = result.workload if result.workload and result.workload.act == Act.PODS_READY else None
    assert ((ready.succeeded, ready.reason) if ready else None) == written
