"""Suspend and resume: pods stop, counts drop to zero, one event each way, and resume starts a new attempt only
if the suspended one had pods."""

import pytest
from tests.support.builders import at, condition, created_names, make_job, pods_of, step, with_policy

from trainingjob.model import Phase

pytestmark = pytest.mark.fast


def test_suspend_stops_every_pod_and_resume_starts_a_new_attempt() -> None:
    job, _ = step(make_job(), [])
    job, _ = step(job, pods_of(job, 1))
    suspended, result = step(with_policy(job, suspend=True), pods_of(job, 1), at(1))
    assert suspended.status and suspended.status.phase == Phase.SUSPENDED
    assert sorted(result.delete) == ["job-worker-0-1", "job-worker-1-1"]
    suspended, _ = step(suspended, [], at(2))
    assert suspended.status and suspended.status.workers.active == 0 and suspended.status.workers.ready == 0
    resumed, result = step(with_policy(suspended, suspend=False), [], at(3))
    assert resumed.status and resumed.status.attempt == 2 and resumed.status.phase == Phase.PENDING
    assert created_names(result) == ["job-worker-0-2", "job-worker-1-2"]
    assert [e.reason for e in result.events] == ["JobResumed"] and result.events[0].type == "Normal"
    assert sum(resumed.status.restarts.model_dump().values()) == 0
    assert condition(resumed, "Suspended").status == "False"


def test_a_job_created_suspended_starts_its_first_attempt_as_pending() -> None:
    job, result = step(make_job(suspend=True), [])
    assert not result.create and job.status and job.status.phase == Phase.SUSPENDED and job.status.attempt == 0
    job, result = step(with_policy(job, suspend=False), [], at(1))
    assert job.status and job.status.attempt == 1 and job.status.phase == Phase.PENDING
    assert created_names(result) == ["job-worker-0-1", "job-worker-1-1"]


def test_suspend_during_the_backoff_does_not_skip_an_attempt() -> None:
    job, _ = step(make_job(), [])
    job, _ = step(job, pods_of(job, 1))
    job, _ = step(job, pods_of(job, 1, {"job-worker-0-1": {"phase": "Failed", "exit_code": 75}}), at(1))
    assert job.status and job.status.attempt == 2
    job, _ = step(with_policy(job, suspend=True), [], at(2))
    job, result = step(with_policy(job, suspend=False), [], at(60))
    assert job.status and job.status.attempt == 2 and created_names(result) == ["job-worker-0-2", "job-worker-1-2"]
