"""An elastic job's attempt runs with status.scale.current workers (spec.workers.replicas when unset): its slots, its
pods' environment and gang size; its Kueue Workload's pod sets count every replica (the quota it may grow back into:
an admitted Workload's pod sets cannot change)."""

from datetime import UTC, datetime

import pytest
from tests.support import builders

from trainingjob.children import contract
from trainingjob.children.naming import MIN_AVAILABLE_ANNOTATION, Replica
from trainingjob.children.observe import Observed
from trainingjob.children.specs import pod_manifest, replicas
from trainingjob.children.workload import workload_manifest
from trainingjob.model import TrainingJob, TrainingJobStatus, WorkerScale
from trainingjob.plan.types import Context, Settings

pytestmark = pytest.mark.fast
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def job_at(current: int | None, min_replicas: int | None = 2) -> TrainingJob:
    workers = {"replicas": 4, "nprocPerPod": 2} | ({"minReplicas": min_replicas} if min_replicas else {})
    job = builders.make_job(namespace="team", trainer={"steps": 10}, workers=workers)
    if current is None:
        return job
    scale = WorkerScale(current=current, desired=4, workers=f"{current}/4", reason="CapacityLost", since=T0)
    return job.model_copy(update={"status": TrainingJobStatus(scale=scale)})


CASES = [
    # (status.scale.current, minReplicas) -> (pods, WORLD_SIZE, TJ_DESIRED_WORLD_SIZE)
    pytest.param(None, 2, (4, "8", "8"), id="elastic-not-resized-all-replicas"),
    pytest.param(2, 2, (2, "4", "8"), id="shrunk-to-2-the-full-world-still-desired"),
    pytest.param(3, 2, (3, "6", "8"), id="grown-to-3"),
    pytest.param(4, 2, (4, "8", "8"), id="grown-back-to-all"),
    pytest.param(None, None, (4, "8", None), id="not-elastic"),
]


@pytest.mark.parametrize(("current", "fewest", "expected"), CASES)
def test_the_attempt_runs_with_the_current_worker_count(
    current: int | None, fewest: int | None, expected: tuple[int, str, str | None]
) -> None:
    job = job_at(current, fewest)
    pods, world, desired = expected
    ctx = Context(job, Observed(), T0, Settings())
    assert [r.index for r in ctx.slots] == list(range(pods)) == [r.index for r in replicas(job)]
    pod = pod_manifest(job, "uid", Replica("worker", pods - 1), attempt=3)
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"] if "value" in e}
    assert (env[contract.WORLD_SIZE], env.get(contract.DESIRED_WORLD_SIZE)) == (world, desired)
    assert env[contract.PET_NNODES] == env[contract.NUM_WORKERS] == str(pods)
    assert env[contract.RANK] == str((pods - 1) * 2)
    assert pod["metadata"]["annotations"][MIN_AVAILABLE_ANNOTATION] == str(pods)
    workload = workload_manifest(job, "0123456789ab", "team-a", None)  # the quota to grow back into: all replicas
    assert [(s["name"], s["count"]) for s in workload["spec"]["podSets"]] == [("worker", 4)]
