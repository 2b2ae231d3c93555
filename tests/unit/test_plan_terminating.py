"""A pod that does not go (a finalizer nobody removes, a node that does not answer): force-deleted once, not on
every pass; one Warning Event naming the pod and its finalizers; the job's conditions say what it waits for; the
wait is polled with a growing delay and counted by the startup deadline, so the job ends with words."""

from typing import Any

import pytest
from tests.support.builders import SETTINGS, at, condition, created_names, make_job, pods_of, step

from trainingjob.model import Phase, TrainingJob

pytestmark = pytest.mark.fast

HOLD = "example.com/backup-hold"
TIMEOUT = SETTINGS.terminating_timeout_seconds  # 60 s


def restarted(**policy: Any) -> TrainingJob:
    """A job whose attempt 1 failed: attempt 2 waits for attempt 1's pods to go."""
    job, _ = step(make_job(**policy), [])
    job, _ = step(job, pods_of(job, 1))
    job, _ = step(job, pods_of(job, 1, {"job-worker-1-1": {"phase": "Failed", "exit_code": 75}}))
    return job


def going(job: TrainingJob, *, finalizers: tuple[str, ...] = (HOLD,), grace_left: bool = True) -> list[Any]:
    """Attempt 1's pods, deleted at 0 s with a 30 s grace period; worker-0 kept by `finalizers`. Without grace
    left (forced already, or never scheduled) the apiserver reports deletionGracePeriodSeconds 0."""
    pods = pods_of(job, 1, {n: {"deleting": at(30)} for n in ("job-worker-0-1", "job-worker-1-1")})
    pods = [p for p in pods if p["metadata"]["name"] == "job-worker-0-1"]  # worker-1 went
    pods[0]["metadata"]["finalizers"] = list(finalizers)
    pods[0]["metadata"]["deletionGracePeriodSeconds"] = 30 if grace_left else 0
    pods[0]["spec"]["nodeName"] = "node-a"
    return pods


@pytest.mark.parametrize(
    ("grace_left", "forced", "reason"),
    [
        pytest.param(True, ["job-worker-0-1"], "ForceDeleted", id="on-a-node-forced-once"),
        pytest.param(False, [], "PodsStuckTerminating", id="no-grace-left-never-forced"),
    ],
)
def test_a_pod_kept_by_a_finalizer_is_forced_at_most_once_and_announced_once(
    grace_left: bool, forced: list[str], reason: str
) -> None:
    job = restarted()
    job, result = step(job, going(job, grace_left=grace_left), at(30 + TIMEOUT))
    assert list(result.force_delete) == forced
    assert [(e.type, e.reason) for e in result.events] == [("Warning", reason)]
    assert "job-worker-0-1" in result.events[0].message and HOLD in result.events[0].message
    for later in (TIMEOUT + 40, TIMEOUT + 100, TIMEOUT + 1000):  # the force delete took no grace left
        job, result = step(job, going(job, grace_left=False), at(30 + later))
        assert not result.force_delete and not result.events and not result.create


def test_the_conditions_say_which_pod_and_finalizer_the_job_waits_for() -> None:
    job = restarted()
    job, _ = step(job, going(job), at(30 + TIMEOUT))
    created = condition(job, "Created")
    assert (created.status, created.reason) == ("False", "PodsStuckTerminating")
    assert "pod job-worker-0-1" in created.message and HOLD in created.message
    running = condition(job, "Running") or condition(job, "Restarting")
    assert "not created yet" not in running.message and HOLD in running.message


@pytest.mark.parametrize(
    ("waited", "delay"),
    [
        pytest.param(TIMEOUT, TIMEOUT, id="as-long-as-it-has-waited"),
        pytest.param(TIMEOUT + 200, TIMEOUT + 200, id="growing"),
        pytest.param(3600, SETTINGS.backoff_max_seconds, id="at-most-the-maximum-backoff"),
    ],
)
def test_the_wait_is_polled_with_a_growing_delay(waited: float, delay: float) -> None:
    job = restarted()
    _, result = step(job, going(job, grace_left=False), at(30 + waited))
    assert result.requeue_after == pytest.approx(delay)


def test_the_startup_deadline_counts_the_wait_and_fails_the_job_with_words() -> None:
    job = restarted(startupDeadlineSeconds=300)
    job, _ = step(job, going(job), at(30 + TIMEOUT))
    job, _ = step(job, going(job, grace_left=False), at(30 + TIMEOUT + 299))
    assert job.status and job.status.phase == Phase.RESTARTING
    job, result = step(job, going(job, grace_left=False), at(30 + TIMEOUT + 300))
    assert job.status and job.status.phase == Phase.FAILED and not result.create
    failed = condition(job, "Failed")
    assert failed.reason == "StartupDeadlineExceeded" and HOLD in failed.message


def test_once_the_pod_is_gone_the_next_attempt_is_created_and_the_wait_no_longer_counts() -> None:
    job = restarted()
    job, _ = step(job, going(job), at(30 + TIMEOUT))
    job, result = step(job, [], at(30 + TIMEOUT + 5))
    assert created_names(result) == ["job-worker-0-2", "job-worker-1-2"]
    assert condition(job, "Created").reason == "CreatingPods"


def test_a_parameter_server_worker_that_does_not_go_holds_up_only_its_own_replacement() -> None:
    job, _ = step(make_job(mode="ParameterServer", workers=3, servers=1), [])
    job, _ = step(job, pods_of(job, 1))
    two = {n: {"phase": "Failed", "exit_code": 75} for n in ("job-worker-0-1", "job-worker-2-1")}
    job, _ = step(job, pods_of(job, 1, two), at(1))
    kept = pods_of(job, 1, {"job-worker-0-1": {**two["job-worker-0-1"], "deleting": at(2)}})
    kept = [p for p in kept if p["metadata"]["name"] != "job-worker-2-1"]  # worker-2 went, worker-0 does not
    next(p for p in kept if p["metadata"]["name"] == "job-worker-0-1")["metadata"].update(
        finalizers=[HOLD], deletionGracePeriodSeconds=0
    )
    job, result = step(job, kept, at(2 + TIMEOUT))
    assert created_names(result) == ["job-worker-2-1"] and not result.force_delete
    assert condition(job, "Created").reason == "PodsStuckTerminating" and result.requeue_after == pytest.approx(TIMEOUT)
    assert result.all_created is None, "worker-0's slot is still held: its creation record must not say all created"
    running = condition(job, "Running")
    assert job.status and job.status.phase == Phase.RUNNING and HOLD in running.message


def test_another_pod_stuck_behind_the_first_is_no_new_announcement() -> None:
    job = restarted()
    deleted = {"job-worker-0-1": at(30), "job-worker-1-1": at(40)}
    pods = pods_of(job, 1, {n: {"deleting": t} for n, t in deleted.items()})
    for manifest in pods:
        manifest["metadata"].update(finalizers=[HOLD], deletionGracePeriodSeconds=0)
    job, result = step(job, pods, at(30 + TIMEOUT))
    assert [e.reason for e in result.events] == ["PodsStuckTerminating"]
    job, result = step(job, pods, at(40 + TIMEOUT))
    assert "(and 1 more)" in condition(job, "Created").message and not result.events


def test_the_wait_counts_from_when_the_pod_became_stuck_not_from_when_creation_began() -> None:
    # Created has been False (creating attempt 2) since the restart; the old pod is deleted only much later, and
    # is stuck TIMEOUT after its grace period: the startup deadline counts from then, not from the restart.
    job = restarted(startupDeadlineSeconds=300)
    late = pods_of(job, 1, {"job-worker-0-1": {"deleting": at(2000)}})
    late = [p for p in late if p["metadata"]["name"] == "job-worker-0-1"]
    late[0]["metadata"]["finalizers"] = [HOLD]
    job, _ = step(job, late, at(2000 + TIMEOUT))
    assert job.status and job.status.phase == Phase.RESTARTING, condition(job, "Failed")
    job, _ = step(job, late, at(2000 + TIMEOUT + 299))
    assert job.status and job.status.phase == Phase.RESTARTING
    job, _ = step(job, late, at(2000 + TIMEOUT + 300))
    assert job.status and job.status.phase == Phase.FAILED
