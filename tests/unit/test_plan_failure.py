"""The failure policy: how pods end is classified, counted once by UID, and answered with a gang restart, a
worker replacement or a failed job."""

from dataclasses import replace
from typing import Any

import pytest
from tests.support.builders import SETTINGS, at, created_names, make_job, pod, pods_of, running, seen, step, without

from trainingjob.children.naming import Replica
from trainingjob.model import FailureClass, Phase, PodOutcome, TrainingJob
from trainingjob.plan import plan

pytestmark = pytest.mark.fast

EMPTY_DIR = 'Usage of EmptyDir volume "scratch" exceeds the limit "1Gi". '
PRESSURE = "The node was low on resource: memory. "
DISRUPTION = [{"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet"}]


@pytest.mark.parametrize(
    ("ending", "failure", "reason"),
    [
        ({"phase": "Failed", "exit_code": 75}, FailureClass.RETRYABLE, "Error"),
        ({"phase": "Failed", "exit_code": 137, "reason": "OOMKilled"}, FailureClass.OOM, "OOMKilled"),
        ({"phase": "Failed", "exit_code": 79}, FailureClass.DISRUPTION, "Error"),
        (
            {"phase": "Failed", "reason": "Evicted", "message": PRESSURE, "conditions": DISRUPTION},
            FailureClass.DISRUPTION,
            "Evicted",
        ),
        ({"phase": "Failed", "reason": "Evicted", "message": EMPTY_DIR}, FailureClass.RETRYABLE, "Evicted"),
        ({"phase": "Failed", "exit_code": 1, "reason": "OutOfcpu"}, FailureClass.RETRYABLE, "OutOfcpu"),
        ({"phase": "Failed", "exit_code": 1, "reason": "x" * 5000}, FailureClass.RETRYABLE, "x" * 128),
        ({"phase": "Running", "deleting": at(0)}, FailureClass.DISRUPTION, "Deleted"),
    ],
    ids=[
        "retryable",
        "oom",
        "preempted-79",
        "node-pressure",
        "own-emptydir-limit",
        "an-exit-code-is-the-trainers-whatever-the-reason",
        "huge-reason",
        "deleted-by-user",
    ],
)
def test_a_failed_rank_is_classified_and_the_gang_restarts(
    ending: dict[str, Any], failure: FailureClass, reason: str
) -> None:
    job = running(disruptionLimit=5)
    job, result = step(job, pods_of(job, 1, {"job-worker-1-1": ending}), at(1))
    assert job.status and job.status.phase == Phase.RESTARTING and job.status.attempt == 2
    assert job.status.last_failure and job.status.last_failure.failure_class == failure
    assert job.status.last_failure.reason == reason and job.status.last_failure.pod == "job-worker-1-1"
    counts = job.status.restarts.model_dump()
    assert (
        sum(counts.values()) == 1
        and counts[{"Retryable": "retryable", "OOMKilled": "oom", "Disruption": "disruption"}[failure]] == 1
    )
    assert set(result.delete) == {"job-worker-0-1"} | ({"job-worker-1-1"} if "deleting" not in ending else set())
    job.status.model_validate(job.status.model_dump())  # what the apiserver would be asked to store is valid


def test_two_ranks_failing_together_end_one_attempt_counted_once() -> None:
    job = running()
    both = {n: {"phase": "Failed", "exit_code": 1} for n in ("job-worker-0-1", "job-worker-1-1")}
    job, _ = step(job, pods_of(job, 1, both), at(1))
    assert job.status and job.status.restarts.retryable == 1 and job.status.attempt == 2
    job, _ = step(job, pods_of(job, 1, both), at(2))  # the old pods are still there: nothing more is counted
    assert job.status and job.status.restarts.retryable == 1 and job.status.attempt == 2


def test_a_pod_that_vanished_is_a_disruption_and_one_never_created_is_created() -> None:
    job = running()
    job, _ = step(job, without(pods_of(job, 1), "job-worker-1-1"), at(1))
    assert job.status and job.status.restarts.disruption == 1 and job.status.last_failure
    assert job.status.last_failure.reason == "Vanished" and job.status.last_failure.pod == "job-worker-1-1"
    assert job.status.last_failure.pod_uid is None  # its record, read back, named it alone (model/tracked.py)
    fresh, _ = step(make_job(), [])
    fresh, result = step(fresh, without(pods_of(fresh, 1), "job-worker-1-1"), at(1))
    assert fresh.status and fresh.status.restarts.disruption == 0 and fresh.status.attempt == 1
    assert created_names(result) == ["job-worker-1-1"]


@pytest.mark.parametrize(
    ("limits", "ending", "verdict"),
    [
        ({"backoffLimit": 0}, {"exit_code": 1}, "BackoffLimitExceeded"),
        ({"restartPolicy": "Never"}, {"exit_code": 1}, "RestartPolicyNever"),
        ({}, {"exit_code": 78}, "PermanentFailure"),
        ({"disruptionLimit": 0}, {"exit_code": 79}, "DisruptionLimitExceeded"),
        ({"backoffLimit": 0}, {"reason": "Evicted", "message": EMPTY_DIR}, "BackoffLimitExceeded"),
    ],
    ids=["backoff-limit", "restart-never", "permanent-code", "disruption-limit", "own-limit-eviction"],
)
def test_every_restart_has_a_bound(limits: dict[str, Any], ending: dict[str, Any], verdict: str) -> None:
    job = running(**limits)
    job, result = step(job, pods_of(job, 1, {"job-worker-0-1": {"phase": "Failed", **ending}}), at(1))
    assert job.status and job.status.phase == Phase.FAILED and job.status.attempt == 1
    failed = next(c for c in job.status.conditions if c.type == "Failed")
    assert failed.reason == verdict and "job-worker-0-1" in failed.message
    assert "job-worker-1-1" in result.delete and not result.create


def test_restart_policy_never_still_restarts_after_a_disruption() -> None:
    job = running(restartPolicy="Never")
    job, _ = step(job, pods_of(job, 1, {"job-worker-0-1": {"phase": "Failed", "exit_code": 79}}), at(1))
    assert job.status and job.status.phase == Phase.RESTARTING and job.status.restarts.disruption == 1


def ps_running(workers: int = 3, **policy: Any) -> TrainingJob:
    return running(mode="ParameterServer", workers=workers, servers=1, **policy)


def test_ps_workers_failing_together_are_each_counted_once_and_replaced_alone() -> None:
    job = ps_running()
    two = {n: {"phase": "Failed", "exit_code": 75} for n in ("job-worker-0-1", "job-worker-2-1")}
    failed = pods_of(job, 1, two)
    job, result = step(job, failed, at(1))
    assert job.status and job.status.restarts.retryable == 2 and job.status.restarts.disruption == 0
    assert job.status.attempt == 1 and job.status.phase == Phase.RUNNING
    assert sorted(result.delete) == ["job-worker-0-1", "job-worker-2-1"] and not result.create
    counted = {t.uid for t in job.status.tracked_pods if t.outcome == PodOutcome.FAILED}
    assert counted == {"uid-worker-0-1", "uid-worker-2-1"}
    deleting = pods_of(job, 1, {n: {**f, "deleting": at(30)} for n, f in two.items()})
    job, result = step(job, deleting, at(2))  # the operator came back before they were gone: counted already
    assert job.status and job.status.restarts.retryable == 2 and not result.delete
    job, result = step(job, without(failed, *two), at(3))  # gone, but within the backoff (20 s for 2 restarts)
    assert not result.create and job.status and job.status.restarts.retryable == 2 and result.requeue_after
    job, result = step(job, without(failed, *two), at(30))
    assert sorted(created_names(result)) == ["job-worker-0-1", "job-worker-2-1"]


def test_a_counted_worker_whose_deletion_was_lost_is_deleted_again() -> None:
    job = ps_running()
    failed = pods_of(job, 1, {"job-worker-1-1": {"phase": "Failed", "exit_code": 75}})
    job, _ = step(job, failed, at(1))  # counted, then the operator died before deleting it
    job, result = step(job, failed, at(2))
    assert result.delete == ("job-worker-1-1",) and job.status and job.status.restarts.retryable == 1


def test_a_replacement_that_vanishes_unseen_is_counted_again() -> None:
    job = ps_running()
    job, _ = step(job, pods_of(job, 1, {"job-worker-1-1": {"phase": "Failed", "exit_code": 75}}), at(1))
    job, _ = step(job, without(pods_of(job, 1), "job-worker-1-1"), at(20))
    replacement = pod(job, Replica("worker", 1), 1, uid="uid-replacement", created=at(20))
    job, _ = step(job, [*without(pods_of(job, 1), "job-worker-1-1"), replacement], at(21))
    job, _ = step(job, without(pods_of(job, 1), "job-worker-1-1"), at(22))  # evicted and gone
    assert job.status and job.status.restarts.retryable == 1 and job.status.restarts.disruption == 1
    assert job.status.last_failure and job.status.last_failure.reason == "Vanished"


def test_a_failed_parameter_server_restarts_the_whole_attempt() -> None:
    job = ps_running(workers=2)
    job, result = step(job, pods_of(job, 1, {"job-ps-0-1": {"phase": "Failed", "exit_code": 75}}), at(1))
    assert job.status and job.status.attempt == 2 and len(result.delete) == 3


def test_a_failed_rank_leaves_its_log_tail_as_evidence() -> None:
    job = running()
    observed = seen(pods_of(job, 1, {"job-worker-0-1": {"phase": "Failed", "exit_code": 3}}))
    tails = tuple(replace(p, log_tail="Traceback: boom") if p.name == "job-worker-0-1" else p for p in observed.pods)
    result = plan(job, replace(observed, pods=tails), at(1), SETTINGS)
    assert result.status.last_failure and result.status.last_failure.log_tail == "Traceback: boom"
