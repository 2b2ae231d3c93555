"""A stored job the model refuses fails once, saying why, and is then cleaned up and deleted by its TTL."""

from typing import Any

import pytest
from pydantic import ValidationError
from tests.support.builders import at, job_manifest, make_job, pods_of, seen

from trainingjob.model import Phase, TrainingJob
from trainingjob.plan.invalid import plan_invalid, salvaged_status

pytestmark = pytest.mark.fast


def invalid(**policy: Any) -> tuple[dict[str, Any], ValidationError]:
    manifest = job_manifest(runPolicy=policy)
    manifest["spec"]["workers"]["replicas"] = 0  # as a CRD before a validation was added let it in
    try:
        TrainingJob.model_validate(manifest)
    except ValidationError as error:
        return manifest, error
    raise AssertionError("the job should be invalid")


def test_an_invalid_job_fails_cleans_up_and_goes_after_its_ttl() -> None:
    manifest, error = invalid(ttlSecondsAfterFinished=60)
    pods = pods_of(make_job(), 1)
    result = plan_invalid(manifest, error, seen(pods), at(0))
    assert result.status.phase == Phase.FAILED and sorted(result.delete) == ["job-worker-0-1", "job-worker-1-1"]
    failed = next(c for c in result.status.conditions if c.type == "Failed")
    assert failed.reason == "InvalidSpec" and "spec.workers.replicas" in failed.message
    assert [e.reason for e in result.events] == ["InvalidSpec"]
    manifest["status"] = result.status.model_dump(mode="json", by_alias=True, exclude_none=True)
    later = plan_invalid(manifest, error, seen([]), at(30))
    assert not later.events and not later.delete_job and later.requeue_after == 30
    assert plan_invalid(manifest, error, seen([]), at(60)).delete_job


def test_an_invalid_job_keeps_its_progress_but_no_estimated_completion() -> None:
    manifest, error = invalid()
    progress = {"step": 40, "totalSteps": 100, "percent": 40, "estimatedCompletionTime": "2026-01-01T01:00:00Z"}
    manifest["status"] = {"phase": "Running", "attempt": 1, "progress": progress}
    result = plan_invalid(manifest, error, seen([]), at(0))
    assert result.status.phase == Phase.FAILED and result.status.progress
    assert (result.status.progress.percent, result.status.progress.estimated_completion_time) == (40, None)


def test_a_status_the_model_refuses_keeps_what_is_still_valid() -> None:
    status = salvaged_status({"attempt": 3, "phase": "Running", "lastFailure": {"reason": 7}, "bogus": 1})
    assert status.attempt == 3 and status.phase == Phase.RUNNING and status.last_failure is None


def test_pod_records_valid_alone_but_not_together_are_dropped_from_the_salvaged_status() -> None:
    stored = {
        "phase": "Running",
        "trackedPods": [{"name": "job-worker-1-1", "uid": ""}],
        "trackedPodRanges": [{"prefix": "job-worker-", "suffix": "-1", "indices": "1-2"}],
    }
    status = salvaged_status(stored)
    assert status.phase == "Running" and status.tracked_pods == []
