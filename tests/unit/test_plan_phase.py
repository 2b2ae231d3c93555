"""The phase and the Running condition: why a job is not running yet, in the kubelet's and scheduler's
words; a parameter-server job stays Running while a worker is replaced; counts always match the pods."""

import pytest
from tests.support.builders import at, condition, make_job, pods_of, step, with_policy, without

from trainingjob.model import Phase

pytestmark = pytest.mark.fast

IMAGE = {
    "containerStatuses": [
        {
            "name": "trainer",
            "state": {"waiting": {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "nope:1"'}},
        }
    ]
}
CONFIG = {
    "containerStatuses": [
        {
            "name": "trainer",
            "state": {"waiting": {"reason": "CreateContainerConfigError", "message": 'secret "token" not found'}},
        }
    ]
}
PVC = {
    "conditions": [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": 'persistentvolumeclaim "ckpt" not found',
        }
    ]
}


@pytest.mark.parametrize(
    ("status", "words"),
    [
        (IMAGE, "ImagePullBackOff: Back-off pulling image"),
        (CONFIG, 'secret "token" not found'),
        (PVC, 'persistentvolumeclaim "ckpt" not found'),
    ],
    ids=["image-pull", "missing-secret", "missing-pvc"],
)
def test_a_pending_job_says_why(status: dict[str, object], words: str) -> None:
    job, _ = step(make_job(), [])
    job, _ = step(job, pods_of(job, 1, {"job-worker-1-1": {"phase": "Pending", **status}}), at(1))
    running = condition(job, "Running")
    assert job.status and job.status.phase == Phase.PENDING and running.status == "False"
    assert running.reason == "PodsNotRunning" and words in running.message and "1 of 2 pods" in running.message


def test_all_pods_running_makes_the_job_running_once() -> None:
    job, _ = step(make_job(), [])
    job, result = step(job, pods_of(job, 1), at(1))
    assert job.status and job.status.phase == Phase.RUNNING and job.status.workers.ready == 2
    assert [e.reason for e in result.events] == ["AllReplicasRunning"]
    again, result = step(job, pods_of(job, 1), at(5))
    assert again.status == job.status and not result.events and not result.create and not result.delete


def test_counts_follow_the_pods_when_suspended_and_after_cleanup() -> None:
    job, _ = step(make_job(), [])
    job, _ = step(job, pods_of(job, 1), at(1))
    job, _ = step(with_policy(job, suspend=True), pods_of(job, 1), at(2))
    job, _ = step(job, [], at(3))
    assert job.status and job.status.workers.active == 0
    failed, _ = step(make_job(), [])
    failed, _ = step(failed, pods_of(failed, 1, {"job-worker-0-1": {"phase": "Failed", "exit_code": 78}}), at(1))
    failed, _ = step(failed, [], at(2))
    assert failed.status and failed.status.phase == Phase.FAILED and failed.status.workers.active == 0
    assert failed.status.workers.failed == 0


def test_success_cleans_running_pods_and_the_ttl_deletes_the_job() -> None:
    job, _ = step(make_job(mode="ParameterServer", workers=2, servers=1, ttlSecondsAfterFinished=60), [])
    done = pods_of(job, 1, {n: {"phase": "Succeeded", "exit_code": 0} for n in ("job-worker-0-1", "job-worker-1-1")})
    job, result = step(job, done)
    assert job.status and job.status.phase == Phase.SUCCEEDED and result.delete == ("job-ps-0-1",)
    assert result.requeue_after == pytest.approx(60)
    job, result = step(job, done, at(30))
    assert not result.delete_job and not result.create
    job, result = step(job, done, at(60))
    assert result.delete_job


def test_a_worker_that_succeeded_and_then_went_still_counts_as_done() -> None:
    job, _ = step(make_job(), [])
    job, _ = step(job, pods_of(job, 1, {"job-worker-0-1": {"phase": "Succeeded", "exit_code": 0}}), at(1))
    job, _ = step(job, without(pods_of(job, 1), "job-worker-0-1"), at(2))  # its node went after it finished
    assert job.status and job.status.restarts.disruption == 0 and job.status.attempt == 1
    job, _ = step(
        job,
        without(pods_of(job, 1, {"job-worker-1-1": {"phase": "Succeeded", "exit_code": 0}}), "job-worker-0-1"),
        at(3),
    )
    assert job.status and job.status.phase == Phase.SUCCEEDED and job.status.workers.succeeded == 2


def _held_up(exit_code: int) -> dict[str, object]:
    """A pod whose trainer ended with `exit_code` while an injected sidecar keeps it Running."""
    trainer = {"name": "trainer", "state": {"terminated": {"exitCode": exit_code, "reason": "Completed"}}}
    return {"phase": "Running", "containerStatuses": [trainer, {"name": "istio-proxy", "state": {"running": {}}}]}


def test_a_job_whose_trainers_ended_succeeds_and_deletes_the_pods_its_sidecars_hold_up() -> None:
    job, _ = step(make_job(workers=2), [])
    done = pods_of(job, 1, {n: _held_up(0) for n in ("job-worker-0-1", "job-worker-1-1")})
    job, result = step(job, done, at(1))
    assert job.status and job.status.phase == Phase.SUCCEEDED and job.status.workers.succeeded == 2
    assert sorted(result.delete) == ["job-worker-0-1", "job-worker-1-1"]  # cleanPodPolicy Running: they hold GPUs


def test_a_trainer_that_failed_under_a_running_sidecar_fails_its_attempt() -> None:
    job, _ = step(make_job(workers=2), [])
    job, _ = step(job, pods_of(job, 1, {"job-worker-1-1": _held_up(1)}), at(1))
    assert job.status and job.status.attempt == 2 and job.status.last_failure
    assert job.status.last_failure.pod == "job-worker-1-1" and job.status.last_failure.exit_code == 1
