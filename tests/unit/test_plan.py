"""The planner, table by table: one reconcile's decisions from a job, its pods and a clock."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from trainingjob.manifests import pod_manifest, replicas
from trainingjob.model import FailureClass, Phase, Progress, TrainingJob
from trainingjob.naming import Replica
from trainingjob.observe import Observed, observe
from trainingjob.plan import Plan, Settings, plan

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SETTINGS = Settings(backoff_base_seconds=10, backoff_max_seconds=300)


def make_job(mode: str = "DDP", workers: int = 2, servers: int = 0, **run_policy: Any) -> TrainingJob:
    spec: dict[str, Any] = {"mode": mode, "workers": {"replicas": workers}, "trainer": {"steps": 100}}
    if servers:
        spec["parameterServers"] = {"replicas": servers}
    spec["runPolicy"] = run_policy
    return TrainingJob.model_validate(
        {
            "apiVersion": "trainingjob.io/v1alpha1",
            "kind": "TrainingJob",
            "spec": spec,
            "metadata": {"name": "job", "namespace": "ns", "uid": "job-uid", "generation": 1},
        }
    )


def pod(job: TrainingJob, replica: Replica, attempt: int, phase: str = "Running", **status: Any) -> dict[str, Any]:
    manifest = pod_manifest(job, "job-uid", replica, attempt)
    manifest["metadata"]["uid"] = f"uid-{replica.role}-{replica.index}-{attempt}"
    manifest["metadata"]["creationTimestamp"] = status.pop("created", T0).isoformat()
    if status.pop("deleting", False):
        manifest["metadata"]["deletionTimestamp"] = T0.isoformat()
    exit_code, reason = status.pop("exit_code", None), status.pop("reason", "")
    ready = "True" if phase == "Running" else "False"
    manifest["status"] = {"phase": phase, "conditions": [{"type": "Ready", "status": ready}], **status}
    if exit_code is not None:
        terminated = {"exitCode": exit_code, "reason": reason or ("Completed" if exit_code == 0 else "Error")}
        manifest["status"]["containerStatuses"] = [{"name": "trainer", "state": {"terminated": terminated}}]
    elif reason:
        manifest["status"]["reason"] = reason
    return manifest


def pods_of(
    job: TrainingJob, attempt: int, overrides: dict[str, dict[str, Any]] | None = None, phase: str = "Running"
) -> list[dict[str, Any]]:
    """Every replica's pod in `phase`; overrides maps a pod name to its status fields."""
    overrides = overrides or {}
    result = []
    for replica in replicas(job):
        name = replica.pod_name("job", attempt)
        fields = dict(overrides.get(name, {}))
        result.append(pod(job, replica, attempt, str(fields.pop("phase", phase)), **fields))
    return result


def seen(pods: list[dict[str, Any]], service: bool = True) -> Observed:
    return observe(pods, "trainer", service_exists=service)


def step(
    job: TrainingJob, pods: list[dict[str, Any]], now: datetime = T0, *, service: bool = True
) -> tuple[TrainingJob, Plan]:
    """Plan once and return the job as it would be with the planned status written."""
    result = plan(job, seen(pods, service), now, SETTINGS)
    return job.model_copy(update={"status": result.status}), result


def created_names(result: Plan) -> list[str]:
    return [m["metadata"]["name"] for m in result.create if m["kind"] == "Pod"]


def test_a_new_job_creates_its_service_and_every_pod_at_once() -> None:
    job, result = step(make_job(workers=3), [], service=False)
    assert [m["kind"] for m in result.create] == ["Service", "Pod", "Pod", "Pod"]
    assert created_names(result) == ["job-worker-0-1", "job-worker-1-1", "job-worker-2-1"]
    assert job.status and job.status.attempt == 1 and job.status.phase == Phase.PENDING
    assert [c.type for c in job.status.conditions if c.status == "True"] == ["Created"]


def test_all_pods_running_makes_the_job_running_once() -> None:
    job, _ = step(make_job(), [])
    job, result = step(job, pods_of(job, 1))
    assert job.status and job.status.phase == Phase.RUNNING
    assert job.status.workers.ready == 2
    assert [e.reason for e in result.events] == ["AllReplicasRunning"]
    again, result = step(job, pods_of(job, 1), T0 + timedelta(seconds=5))
    assert again.status == job.status and not result.events and not result.create and not result.delete


def test_a_failed_ddp_rank_restarts_the_whole_gang_after_backoff() -> None:
    job, _ = step(make_job(), [])
    job, _ = step(job, pods_of(job, 1))
    failed = pods_of(job, 1, {"job-worker-1-1": {"phase": "Failed", "exit_code": 75}})
    job, result = step(job, failed)
    assert job.status and job.status.attempt == 2 and job.status.phase == Phase.RESTARTING
    assert job.status.restarts.retryable == 1
    assert sorted(result.delete) == ["job-worker-0-1", "job-worker-1-1"]
    assert job.status.last_failure and job.status.last_failure.pod == "job-worker-1-1"
    assert job.status.last_failure.exit_code == 75
    # The old pods are still terminating: nothing new yet.
    terminating = pods_of(job, 1, {n: {"deleting": True} for n in ("job-worker-0-1", "job-worker-1-1")})
    job, result = step(job, terminating, T0 + timedelta(seconds=1))
    assert not result.create and result.requeue_after is not None
    # Gone, but the backoff (10 s after the first restart) has not passed.
    job, result = step(job, [], T0 + timedelta(seconds=5))
    assert not result.create and result.requeue_after == pytest.approx(5)
    job, result = step(job, [], T0 + timedelta(seconds=10))
    assert created_names(result) == ["job-worker-0-2", "job-worker-1-2"]


def test_backoff_limit_exhausted_fails_the_job_naming_the_last_failure() -> None:
    job = make_job(backoffLimit=1)
    job, _ = step(job, [])
    job, _ = step(job, pods_of(job, 1, {"job-worker-0-1": {"phase": "Failed", "exit_code": 1}}))
    assert job.status and job.status.attempt == 2
    job, result = step(
        job,
        pods_of(job, 2, {"job-worker-1-2": {"phase": "Failed", "exit_code": 1}}),
        T0 + timedelta(minutes=1),
    )
    assert job.status and job.status.phase == Phase.FAILED
    failed = next(c for c in job.status.conditions if c.type == "Failed")
    assert failed.reason == "BackoffLimitExceeded" and "job-worker-1-2" in failed.message
    assert job.status.completion_time == T0 + timedelta(minutes=1)
    assert "job-worker-0-2" in result.delete  # cleanPodPolicy Running: the running peer goes


@pytest.mark.parametrize(
    ("status", "failure"),
    [
        ({"phase": "Failed", "reason": "Evicted"}, FailureClass.DISRUPTION),
        (
            {
                "phase": "Running",
                "deleting": True,
                "conditions": [{"type": "DisruptionTarget", "status": "True"}],
            },
            FailureClass.DISRUPTION,
        ),
        ({"phase": "Failed", "exit_code": 79}, FailureClass.DISRUPTION),
        ({"phase": "Failed", "exit_code": 137, "reason": "OOMKilled"}, FailureClass.OOM),
        ({"phase": "Failed", "exit_code": 75}, FailureClass.RETRYABLE),
    ],
    ids=["kubelet-eviction", "api-eviction", "preempted-exit-79", "oom-killed", "retryable-exit"],
)
def test_failures_are_classified_and_counted_apart(status: dict[str, Any], failure: FailureClass) -> None:
    job, _ = step(make_job(backoffLimit=0, restartPolicy="OnFailure"), [])
    job, _ = step(job, pods_of(job, 1, {"job-worker-1-1": status}))
    assert job.status and job.status.last_failure and job.status.last_failure.failure_class == failure
    if failure == FailureClass.DISRUPTION:
        assert job.status.phase == Phase.RESTARTING and job.status.restarts.disruption == 1
    else:
        assert job.status.phase == Phase.FAILED  # backoffLimit 0: the first budgeted failure ends it


def test_a_permanent_exit_code_fails_at_once() -> None:
    job, _ = step(make_job(), [])
    job, _ = step(job, pods_of(job, 1, {"job-worker-0-1": {"phase": "Failed", "exit_code": 78}}))
    assert job.status and job.status.phase == Phase.FAILED
    assert job.status.conditions[-1].reason == "PermanentFailure"


def test_restart_policy_never_fails_on_the_first_failure() -> None:
    job, _ = step(make_job(restartPolicy="Never"), [])
    job, _ = step(job, pods_of(job, 1, {"job-worker-0-1": {"phase": "Failed", "exit_code": 1}}))
    assert job.status and job.status.phase == Phase.FAILED


def test_a_vanished_ddp_pod_is_a_disruption() -> None:
    job, _ = step(make_job(), [])
    job, _ = step(job, pods_of(job, 1)[:1])
    assert job.status and job.status.attempt == 2 and job.status.restarts.disruption == 1
    assert job.status.last_failure and job.status.last_failure.pod == "job-worker-1-1"


def test_a_failed_ps_worker_is_replaced_alone_and_counted_once() -> None:
    job, _ = step(make_job("ParameterServer", workers=3, servers=2), [])
    job, _ = step(job, pods_of(job, 1))
    failed = pods_of(job, 1, {"job-worker-2-1": {"phase": "Failed", "exit_code": 75}})
    job, result = step(job, failed)
    assert result.delete == ["job-worker-2-1"] and not result.create
    assert job.status and job.status.attempt == 1 and job.status.restarts.retryable == 1
    job, result = step(job, failed)  # the operator restarted before deleting it: still one restart
    assert job.status and job.status.restarts.retryable == 1 and result.delete == ["job-worker-2-1"]
    job, result = step(job, [p for p in failed if p["metadata"]["name"] != "job-worker-2-1"])
    assert created_names(result) == ["job-worker-2-1"]
    assert job.status and job.status.restarts.retryable == 1 and job.status.attempt == 1


def test_a_failed_parameter_server_restarts_the_attempt() -> None:
    job, _ = step(make_job("ParameterServer", workers=2, servers=2), [])
    job, result = step(job, pods_of(job, 1, {"job-ps-1-1": {"phase": "Failed", "exit_code": 75}}))
    assert job.status and job.status.attempt == 2 and len(result.delete) == 4


def test_suspend_stops_every_pod_and_resume_starts_a_new_attempt() -> None:
    job, _ = step(make_job(), [])
    job, _ = step(job, pods_of(job, 1))
    suspended = job.model_copy(
        update={
            "spec": job.spec.model_copy(update={"run_policy": job.spec.run_policy.model_copy(update={"suspend": True})})
        }
    )
    suspended, result = step(suspended, pods_of(job, 1))
    assert suspended.status and suspended.status.phase == Phase.SUSPENDED
    assert sorted(result.delete) == ["job-worker-0-1", "job-worker-1-1"]
    resumed = suspended.model_copy(update={"spec": job.spec})
    resumed, result = step(resumed, [])
    assert resumed.status and resumed.status.attempt == 2
    assert created_names(result) == ["job-worker-0-2", "job-worker-1-2"]
    assert resumed.status.restarts.retryable == 0 and resumed.status.restarts.disruption == 0


def test_a_job_created_suspended_creates_nothing() -> None:
    job, result = step(make_job(suspend=True), [])
    assert not result.create and job.status and job.status.phase == Phase.SUSPENDED and job.status.attempt == 0


def test_success_cleans_running_pods_and_ttl_deletes_the_job() -> None:
    job, _ = step(make_job("ParameterServer", workers=2, servers=1, ttlSecondsAfterFinished=60), [])
    done = pods_of(job, 1, {n: {"phase": "Succeeded", "exit_code": 0} for n in ("job-worker-0-1", "job-worker-1-1")})
    job, result = step(job, done)
    assert job.status and job.status.phase == Phase.SUCCEEDED
    assert result.delete == ["job-ps-0-1"]
    assert result.requeue_after == pytest.approx(60)
    job, result = step(job, done, T0 + timedelta(seconds=30))
    assert not result.delete_job and not result.create
    job, result = step(job, done, T0 + timedelta(seconds=60))
    assert result.delete_job


def test_a_finished_job_never_recreates_pods() -> None:
    job, _ = step(make_job(), [])
    job, _ = step(job, pods_of(job, 1, {"job-worker-0-1": {"phase": "Failed", "exit_code": 78}}))
    job, result = step(job, [], T0 + timedelta(hours=1))
    assert not result.create and job.status and job.status.phase == Phase.FAILED


def test_active_deadline_fails_the_job() -> None:
    job, _ = step(make_job(activeDeadlineSeconds=100), [])
    job, result = step(job, pods_of(job, 1), T0 + timedelta(seconds=50))
    assert result.requeue_after == pytest.approx(50)
    job, result = step(job, pods_of(job, 1), T0 + timedelta(seconds=100))
    assert job.status and job.status.phase == Phase.FAILED and job.status.conditions[-1].reason == "DeadlineExceeded"
    assert sorted(result.delete) == ["job-worker-0-1", "job-worker-1-1"]


def test_startup_deadline_reports_why_the_gang_cannot_start() -> None:
    job, _ = step(make_job(startupDeadlineSeconds=30), [])
    why = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    scheduled = {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": why}]}
    pending = pods_of(job, 1, {"job-worker-1-1": {"phase": "Pending", **scheduled}})
    job, result = step(job, pending, T0 + timedelta(seconds=10))
    assert job.status and job.status.phase == Phase.PENDING and result.requeue_after == pytest.approx(20)
    job, _ = step(job, pending, T0 + timedelta(seconds=30))
    assert job.status and job.status.phase == Phase.FAILED
    failed = job.status.conditions[-1]
    assert failed.reason == "StartupDeadlineExceeded" and why.rstrip(".") in failed.message


def test_every_pod_of_a_running_attempt_vanishing_is_a_disruption_not_a_fresh_start() -> None:
    job, _ = step(make_job(), [])
    job, _ = step(job, pods_of(job, 1))
    job, result = step(job, [])
    assert job.status and job.status.attempt == 2 and job.status.restarts.disruption == 1
    assert not result.create


def test_the_first_rank_to_die_is_blamed_not_the_peers_it_took_down() -> None:
    job, _ = step(make_job(), [])
    crashed = {
        "job-worker-0-1": {"phase": "Failed", "exit_code": 75},
        "job-worker-1-1": {"phase": "Failed", "exit_code": 137},
    }
    pods = pods_of(job, 1, crashed)
    pods[0]["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"] = "2026-01-01T00:00:05Z"
    pods[1]["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"] = "2026-01-01T00:00:01Z"
    job, _ = step(job, pods)
    assert job.status and job.status.last_failure and job.status.last_failure.pod == "job-worker-1-1"


def test_no_progress_for_the_deadline_restarts_the_attempt_as_stalled() -> None:
    job, _ = step(make_job(progressDeadlineSeconds=60), [])
    job, _ = step(job, pods_of(job, 1))
    heartbeat = Progress(step=40, last_heartbeat_time=T0 + timedelta(seconds=30))
    reported = seen(pods_of(job, 1))
    reported = Observed(reported.pods, reported.service_exists, progress=heartbeat)
    still = plan(job, reported, T0 + timedelta(seconds=80), SETTINGS)
    assert still.status.phase == Phase.RUNNING and still.requeue_after == pytest.approx(10)
    assert still.status.progress and still.status.progress.step == 40
    job = job.model_copy(update={"status": still.status})
    stalled = plan(job, reported, T0 + timedelta(seconds=90), SETTINGS)
    assert stalled.status.phase == Phase.RESTARTING and stalled.status.attempt == 2
    assert stalled.status.restarts.stalled == 1
    assert stalled.status.last_failure and stalled.status.last_failure.failure_class == FailureClass.STALLED


def test_a_new_attempts_first_report_does_not_turn_the_step_back() -> None:
    job, _ = step(make_job(), [])
    first = seen(pods_of(job, 1))
    job, _ = step(job, pods_of(job, 1))
    late = plan(job, Observed(first.pods, True, progress=Progress(step=300)), T0, SETTINGS)
    job = job.model_copy(update={"status": late.status})
    early = Progress(step=0, last_heartbeat_time=T0 + timedelta(seconds=9))
    again = plan(job, Observed(first.pods, True, progress=early), T0 + timedelta(seconds=10), SETTINGS)
    assert again.status.progress and again.status.progress.step == 300
    assert again.status.progress.last_heartbeat_time == early.last_heartbeat_time
