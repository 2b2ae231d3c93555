"""The creation policy: an attempt's pods are created together, after the last attempt's pods are gone and the
backoff is over; refusals are recorded and retried with a delay; a stuck pod is force-deleted; a namesake's
leftover pod is waited for, never adopted."""

from dataclasses import replace
from typing import Any

import pytest
from tests.support.builders import SETTINGS, at, condition, created_names, make_job, pod, pods_of, step, without

from trainingjob.children.naming import Replica
from trainingjob.model import Phase
from trainingjob.plan.waves import Refusal, refused

pytestmark = pytest.mark.fast

QUOTA = 'pods "job-worker-0-1" is forbidden: exceeded quota: gpu, requested: nvidia.com/gpu=8, used: 8, limited: 8'


def test_a_new_job_creates_its_service_and_every_pod_at_once() -> None:
    job, result = step(make_job(workers=3), [], service=False)
    assert [m["kind"] for m in result.create] == ["Service", "Secret", "NetworkPolicy", "Pod", "Pod", "Pod"]
    assert created_names(result) == ["job-worker-0-1", "job-worker-1-1", "job-worker-2-1"]
    assert job.status and job.status.attempt == 1 and job.status.phase == Phase.PENDING
    assert [e.reason for e in result.events] == ["JobCreated"]
    job, _ = step(job, pods_of(job, 1, phase="Pending"), at(1))
    created = condition(job, "Created")
    assert created.status == "True" and created.message == "All 3 pods of attempt 1 were created."


def test_new_pods_may_be_scheduled_at_once_and_hold_the_tracking_finalizer() -> None:
    job, result = step(make_job(), [], service=False)
    pods = [m for m in result.create if m["kind"] == "Pod"]
    assert len(pods) == 2 and all(m["metadata"]["finalizers"] == ["trainingjob.io/tracked"] for m in pods)
    assert all("schedulingGates" not in m["spec"] for m in pods)
    job, result = step(job, pods_of(job, 1, phase="Pending"), at(1))  # the operator died before recording them
    assert job.status and {t.name for t in job.status.tracked_pods} == {"job-worker-0-1", "job-worker-1-1"}
    assert not result.ungate and not result.release


def test_an_earlier_operators_gated_pods_are_released_from_the_gate_once_recorded() -> None:
    job, _ = step(make_job(), [], service=False)
    gated = pods_of(job, 1, {n: {"phase": "Pending", "gated": True} for n in ("job-worker-0-1", "job-worker-1-1")})
    job, result = step(job, gated, at(1))
    assert job.status and {t.name for t in job.status.tracked_pods} == {"job-worker-0-1", "job-worker-1-1"}
    assert sorted(result.ungate) == ["job-worker-0-1", "job-worker-1-1"]
    job, result = step(job, pods_of(job, 1, phase="Pending"), at(2))
    assert not result.ungate


def restarted(**policy: Any) -> Any:
    job, _ = step(make_job(**policy), [])
    job, _ = step(job, pods_of(job, 1))
    job, _ = step(job, pods_of(job, 1, {"job-worker-1-1": {"phase": "Failed", "exit_code": 75}}))
    return job


def test_the_next_attempt_waits_for_the_old_pods_to_go_and_for_the_backoff() -> None:
    job = restarted()
    terminating = pods_of(job, 1, {n: {"deleting": at(30)} for n in ("job-worker-0-1", "job-worker-1-1")})
    job, result = step(job, terminating, at(1))
    assert not result.create and not result.delete and result.requeue_after
    job, result = step(job, [], at(5))
    assert not result.create and result.requeue_after == pytest.approx(5)
    job, result = step(job, [], at(10))
    assert created_names(result) == ["job-worker-0-2", "job-worker-1-2"]


def test_pods_of_an_old_attempt_left_by_a_crash_are_deleted_before_anything_is_created() -> None:
    job = restarted()
    job, result = step(job, pods_of(job, 1), at(60))  # the restart was written; the deletions never happened
    assert sorted(result.delete) == ["job-worker-0-1", "job-worker-1-1"] and not result.create


def test_a_pod_stuck_terminating_is_force_deleted_after_the_timeout() -> None:
    job = restarted()
    stuck = pods_of(job, 1, {n: {"deleting": at(30)} for n in ("job-worker-0-1", "job-worker-1-1")})
    job, result = step(job, stuck, at(30 + SETTINGS.terminating_timeout_seconds - 1))
    assert not result.force_delete
    job, result = step(job, stuck, at(30 + SETTINGS.terminating_timeout_seconds))
    assert sorted(result.force_delete) == ["job-worker-0-1", "job-worker-1-1"]
    assert {e.reason for e in result.events} == {"ForceDeleted"}


def test_refused_creations_are_recorded_retried_with_a_growing_delay_and_never_called_disruptions() -> None:
    job, _ = step(make_job(), [])
    assert job.status
    status = refused(job.status, [Refusal("job-worker-0-1", 403, QUOTA)], at(0), 1)
    job = job.model_copy(update={"status": status})
    created = condition(job, "Created")
    assert (created.status, created.reason) == ("False", "PodCreateRefused") and QUOTA in created.message
    partial = without(pods_of(job, 1), "job-worker-0-1")
    job, result = step(job, partial, at(5))  # within the retry delay (the base backoff, 10 s)
    assert not result.create and job.status and job.status.restarts.disruption == 0
    assert "exceeded quota" in condition(job, "Running").message
    job, result = step(job, partial, at(10))
    assert created_names(result) == ["job-worker-0-1"] and job.status and job.status.attempt == 1
    status = refused(job.status, [Refusal("job-worker-0-1", 403, QUOTA)], at(10), 1)
    job = job.model_copy(update={"status": status})
    job, result = step(job, partial, at(19))  # the delay grew to the 10 s the refusals have lasted
    assert not result.create
    job, result = step(job, partial, at(20))
    assert created_names(result) == ["job-worker-0-1"]


def test_refusals_count_against_the_startup_deadline() -> None:
    job, _ = step(make_job(startupDeadlineSeconds=60), [])
    assert job.status
    job = job.model_copy(update={"status": refused(job.status, [Refusal("job-worker-0-1", 403, QUOTA)], at(0), 1)})
    job, result = step(job, [], at(60))
    assert job.status and job.status.phase == Phase.FAILED and not result.create
    failed = condition(job, "Failed")
    assert failed.reason == "StartupDeadlineExceeded" and "exceeded quota" in failed.message


def test_an_invalid_pod_fails_the_job_at_once() -> None:
    job, _ = step(make_job(), [])
    assert job.status
    invalid = Refusal("job-worker-0-1", 422, 'Pod "job-worker-0-1" is invalid: spec.containers[0].image: Required')
    job = job.model_copy(update={"status": refused(job.status, [invalid], at(0), 1)})
    job, result = step(job, [], at(1))
    assert job.status and job.status.phase == Phase.FAILED and not result.create
    assert (
        condition(job, "Failed").reason == "PodInvalid"
        and "spec.containers[0].image" in condition(job, "Failed").message
    )


def test_a_namesakes_leftover_pods_are_never_adopted_nor_overwritten() -> None:
    job, _ = step(make_job(), [])
    old = [
        pod(job, Replica("worker", i), 1, phase="Succeeded", exit_code=0, owner="old-uid", uid=f"old-{i}")
        for i in (0, 1)
    ]
    job, result = step(job, old, at(1))
    assert job.status and job.status.phase == Phase.PENDING and not result.create and result.requeue_after
    assert condition(job, "Created").reason == "PodNameInUse"
    assert "belongs to another object" in condition(job, "Running").message
    job, result = step(job, [], at(2))
    assert created_names(result) == ["job-worker-0-1", "job-worker-1-1"]


def test_a_finished_job_never_creates_pods_again() -> None:
    job, _ = step(make_job(), [])
    job, _ = step(job, pods_of(job, 1, {"job-worker-0-1": {"phase": "Failed", "exit_code": 78}}), at(1))
    assert job.status and job.status.phase == Phase.FAILED
    job, result = step(job, [], at(3600), service=False)
    assert not result.create and job.status and job.status.phase == Phase.FAILED


def _images(result: Any) -> set[str]:
    return {c["image"] for m in result.create if m["kind"] == "Pod" for c in m["spec"]["containers"]}


def test_a_job_keeps_the_default_image_it_started_with_when_the_setting_changes() -> None:
    before = replace(SETTINGS, default_trainer_image="registry.example/trainer:1")
    after = replace(SETTINGS, default_trainer_image="registry.example/trainer:2")
    job, result = step(make_job(), [], settings=before)
    assert job.status and job.status.default_image == "registry.example/trainer:1"
    assert _images(result) == {"registry.example/trainer:1"}
    job, _ = step(job, pods_of(job, 1), settings=after)
    job, _ = step(job, pods_of(job, 1, {"job-worker-1-1": {"phase": "Failed", "exit_code": 75}}), settings=after)
    job, result = step(job, [], at(10), settings=after)
    assert created_names(result) == ["job-worker-0-2", "job-worker-1-2"]
    assert _images(result) == {"registry.example/trainer:1"}
    assert job.status and job.status.default_image == "registry.example/trainer:1"


def test_a_job_that_names_its_images_records_no_default() -> None:
    job, result = step(make_job(workers={"replicas": 2, "image": "mine:1"}), [])
    assert job.status and job.status.default_image is None
    assert _images(result) == {"mine:1"}
