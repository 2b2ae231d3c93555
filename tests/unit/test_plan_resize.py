"""The planner resizes an elastic DDP job (plan/resize.py): a gang that cannot be placed within resizeWaitSeconds
restarts at once with the workers that were placed, not counted as a restart and without failing the startup
deadline meanwhile; a shrunk job grows back at its next checkpoint once room is seen; status.scale, an Event and the
history say so."""

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest
from tests.support.builders import SETTINGS, T0, Manifest, created_names, make_job, pod, step

from trainingjob.children.agent import IN_PLACE_LABEL
from trainingjob.children.naming import Replica
from trainingjob.model import CheckpointStatus, Phase, TrainingJob
from trainingjob.plan.resize import ASKED_POLL_SECONDS

pytestmark = pytest.mark.fast

WAIT, INTERVAL = 120.0, 600.0
ELASTIC = replace(SETTINGS, resize_wait_seconds=WAIT, resize_interval_seconds=INTERVAL)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def elastic_job(min_replicas: int | None = 2, **options: Any) -> TrainingJob:
    workers = {"replicas": 4} | ({"minReplicas": min_replicas} if min_replicas else {})
    return make_job(
        workers=workers,
        startupDeadlineSeconds=30,
        checkpoint={"volume": {"persistentVolumeClaim": {"claimName": "ckpt"}}, "everySteps": 100},
        **options,
    )


def placed(job: TrainingJob, index: int, attempt: int) -> Manifest:
    return pod(job, Replica("worker", index), attempt, node=f"node-{index}")


def unplaced(job: TrainingJob, index: int, attempt: int, since: datetime = T0) -> Manifest:
    scheduled = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    message = "0/4 nodes are available: 2 Insufficient nvidia.com/gpu."
    scheduled |= {"message": message, "lastTransitionTime": since.isoformat()}
    return pod(job, Replica("worker", index), attempt, "Pending", created=since, conditions=[scheduled])


def half_placed(job: TrainingJob, placed_count: int = 2, attempt: int = 1) -> list[Manifest]:
    """The attempt's four workers, the first `placed_count` on a node, the others unschedulable since T0."""
    return [placed(job, i, attempt) if i < placed_count else unplaced(job, i, attempt) for i in range(4)]


def started(job: TrainingJob, pods: list[Manifest]) -> TrainingJob:
    job, _ = step(job, [], T0, settings=ELASTIC)
    job, _ = step(job, pods, T0, settings=ELASTIC)
    return job


def test_within_the_wait_the_gang_waits_for_room_and_the_startup_deadline_does_not_fail_it() -> None:
    job = elastic_job()
    job = started(job, half_placed(job))
    job, result = step(job, half_placed(job), at(WAIT - 20), settings=ELASTIC)
    assert job.status is not None and job.status.phase != Phase.FAILED
    assert job.status.scale is not None and job.status.scale.reason == "WaitingForCapacity"
    assert (job.status.scale.workers, job.status.attempt) == ("4/4", 1)
    assert result.requeue_after is not None and result.requeue_after <= 20 + 0.01


def test_past_the_wait_it_restarts_with_the_placed_workers_not_counted_as_a_restart() -> None:
    job = elastic_job()
    job = started(job, half_placed(job))
    job, result = step(job, half_placed(job), at(WAIT), settings=ELASTIC)
    assert job.status is not None
    assert (job.status.attempt, job.status.phase, job.status.restarts.total) == (2, Phase.RESTARTING, 0)
    assert job.status.last_failure is None
    scale = job.status.scale
    assert scale is not None and (scale.current, scale.desired, scale.workers) == (2, 4, "2/4")
    assert (scale.reason, scale.since, scale.last_resize_time) == ("CapacityLost", at(WAIT), at(WAIT))
    assert sorted(result.delete) == [f"job-worker-{i}-1" for i in range(4)]
    [event] = [e for e in result.events if e.reason == "Resized"]
    assert "from 4 to 2 of 4 workers" in event.message and "unschedulable" in event.message
    job, result = step(job, [], at(WAIT + 11), settings=ELASTIC)  # the old gang is gone: two new ranks
    assert created_names(result) == ["job-worker-0-2", "job-worker-1-2"]
    env = {e["name"]: e.get("value") for e in result.create[-1]["spec"]["containers"][0]["env"]}
    assert (env["WORLD_SIZE"], env["TJ_DESIRED_WORLD_SIZE"]) == ("2", "4")
    assert job.status is not None and job.status.history is not None
    ended = job.status.history.attempts[0]
    assert (ended.outcome, ended.reason) == ("Replaced", "Resized")


@pytest.mark.parametrize(
    ("min_replicas", "placed_count", "reason"),
    [
        pytest.param(3, 2, "BelowMinReplicas", id="fewer-placed-than-minReplicas"),
        pytest.param(None, 2, "NotElastic", id="not-elastic"),
    ],
)
def test_no_shrink_below_min_replicas_nor_for_a_job_that_is_not_elastic(
    min_replicas: int | None, placed_count: int, reason: str
) -> None:
    job = elastic_job(min_replicas)
    job = started(job, half_placed(job, placed_count))
    job, _ = step(job, half_placed(job, placed_count), at(WAIT + 1), settings=ELASTIC)
    assert job.status is not None and job.status.attempt == 1
    assert job.status.phase == Phase.FAILED  # the startup deadline applies, as before
    assert job.status.scale is not None and (job.status.scale.reason, job.status.scale.workers) == (reason, "4/4")


def checkpoint(number: int) -> CheckpointStatus:
    return CheckpointStatus(step=number, path=f"/ckpt/step-{number}", time=T0)


def test_a_shrunk_job_grows_back_at_its_next_checkpoint_once_room_is_seen() -> None:
    job = elastic_job()
    job = started(job, half_placed(job))
    job, _ = step(job, half_placed(job), at(WAIT), settings=ELASTIC)  # shrunk to 2 at WAIT
    gang = [placed(job, i, 2) for i in range(2)]
    job, _ = step(job, gang, at(WAIT + 20), settings=ELASTIC, checkpoint=checkpoint(100))
    job, result = step(job, gang, at(WAIT + 30), settings=ELASTIC, checkpoint=checkpoint(100))
    assert job.status is not None and job.status.scale is not None
    assert (job.status.scale.reason, job.status.scale.grow_after_step) == ("CapacityLost", None)
    assert result.requeue_after == WAIT  # it looks for room again
    later = at(WAIT + INTERVAL + 1)
    job, result = step(job, gang, later, settings=ELASTIC, checkpoint=checkpoint(100), spare=2)
    assert job.status is not None and job.status.scale is not None and job.status.attempt == 2  # not mid-step
    assert (job.status.scale.reason, job.status.scale.grow_after_step) == ("CapacityReturned", 100)
    assert not result.delete
    job, result = step(job, gang, later + timedelta(seconds=5), settings=ELASTIC, checkpoint=checkpoint(200), spare=2)
    assert job.status is not None and job.status.scale is not None
    assert (job.status.attempt, job.status.restarts.total, job.status.scale.workers) == (3, 0, "4/4")
    assert job.status.scale.grow_after_step is None
    [event] = [e for e in result.events if e.reason == "Resized"]
    assert "from 2 to 4 of 4 workers" in event.message


def without_agent(manifest: Manifest) -> Manifest:
    """A pod made before the operator knew in-place restarts (or with them off): no agent to ask."""
    del manifest["metadata"]["labels"][IN_PLACE_LABEL]
    return manifest


@pytest.mark.parametrize(
    ("agents", "asked", "requeue"),
    [
        pytest.param(True, 100, ASKED_POLL_SECONDS, id="asks-rank-0s-agent"),
        pytest.param(False, None, WAIT, id="no-agent"),
    ],
)
def test_room_seen_asks_rank_0_for_a_checkpoint_to_grow_at(agents: bool, asked: int | None, requeue: float) -> None:
    job = elastic_job()
    job = started(job, half_placed(job))
    job, _ = step(job, half_placed(job), at(WAIT), settings=ELASTIC)  # shrunk to 2 at WAIT
    gang = [placed(job, i, 2) if agents else without_agent(placed(job, i, 2)) for i in range(2)]
    job, _ = step(job, gang, at(WAIT + 20), settings=ELASTIC, checkpoint=checkpoint(100))
    job, result = step(job, gang, at(WAIT + 30), settings=ELASTIC, checkpoint=checkpoint(100))
    assert result.ask_checkpoint is None  # no room seen: nothing to grow at
    for seconds in (1, 3):  # asked again on every pass until the checkpoint comes: the ask is idempotent
        later = at(WAIT + INTERVAL + seconds)
        job, result = step(job, gang, later, settings=ELASTIC, checkpoint=checkpoint(100), spare=2)
        assert (result.ask_checkpoint, result.requeue_after) == (asked, requeue)
    job, result = step(job, gang, later, settings=ELASTIC, checkpoint=checkpoint(130), spare=2)
    assert result.ask_checkpoint is None and job.status is not None and job.status.attempt == 3  # grown at 130


@pytest.mark.parametrize(
    ("min_replicas", "workers"),
    [pytest.param(3, 3, id="minReplicas-raised-above-the-current"), pytest.param(None, 4, id="minReplicas-removed")],
)
def test_a_shrunk_job_whose_minimum_is_raised_restarts_with_it_at_once(min_replicas: int | None, workers: int) -> None:
    job = elastic_job()
    job = started(job, half_placed(job))
    job, _ = step(job, half_placed(job), at(WAIT), settings=ELASTIC)  # shrunk to 2
    gang = [placed(job, i, 2) for i in range(2)]
    job, _ = step(job, gang, at(WAIT + 20), settings=ELASTIC)
    edited = {"replicas": 4} | ({"minReplicas": min_replicas} if min_replicas else {})
    spec = job.spec.model_copy(update={"workers": job.spec.workers.model_copy(update={"min_replicas": min_replicas})})
    assert spec.workers.model_dump(by_alias=True, exclude_none=True).items() >= edited.items()
    job, result = step(job.model_copy(update={"spec": spec}), gang, at(WAIT + 30), settings=ELASTIC)
    assert job.status is not None and job.status.scale is not None
    assert (job.status.attempt, job.status.scale.current, job.status.restarts.total) == (3, workers, 0)
    assert sorted(result.delete) == ["job-worker-0-2", "job-worker-1-2"]
