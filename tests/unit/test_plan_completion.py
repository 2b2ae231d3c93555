"""A DDP gang whose workers do not all finish (plan/completion.py): the others get completionGraceSeconds after the
first worker's finish; then the job succeeds if worker 0 did, else the attempt restarts as a stall."""

from dataclasses import replace
from typing import Any

import pytest
from tests.support.builders import SETTINGS, at, pods_of, running, step

from trainingjob.model import FailureClass, Phase

pytestmark = pytest.mark.fast

GRACE = 300.0
W0, W1, W2 = "job-worker-0-1", "job-worker-1-1", "job-worker-2-1"
DONE = {"phase": "Succeeded", "exit_code": 0, "finished": at(10)}
FAILED = {"phase": "Failed", "exit_code": 1, "finished": at(20)}


@pytest.mark.parametrize(
    ("done", "seconds", "phase", "restarted"),
    [
        pytest.param({W1: DONE}, 10 + GRACE - 1, Phase.RUNNING, False, id="worker-1-done-within-grace-waits"),
        pytest.param({W1: DONE}, 10 + GRACE, Phase.RESTARTING, True, id="worker-1-done-past-grace-restarts"),
        pytest.param({W0: DONE}, 10 + GRACE - 1, Phase.RUNNING, False, id="worker-0-done-within-grace-waits"),
        pytest.param({W0: DONE}, 10 + GRACE, Phase.SUCCEEDED, False, id="worker-0-done-past-grace-succeeds"),
        pytest.param({W0: DONE, W1: DONE, W2: DONE}, 11, Phase.SUCCEEDED, False, id="all-done-succeeds-at-once"),
        pytest.param({}, 10 + GRACE, Phase.RUNNING, False, id="none-done-runs-on"),
    ],
)
def test_workers_that_run_on_after_one_finished(
    done: dict[str, dict[str, Any]], seconds: float, phase: Phase, restarted: bool
) -> None:
    job = running(workers=3)
    settings = replace(SETTINGS, completion_grace_seconds=GRACE)
    # the reconcile that sees the first finish records when it was, then one at `seconds`
    job, _ = step(job, pods_of(job, 1, done), at(11), settings=settings)
    after, result = step(job, pods_of(job, 1, done), at(seconds), settings=settings)
    assert after.status is not None
    assert after.status.phase == phase
    assert (after.status.restarts.stalled == 1) is restarted
    if restarted:
        assert after.status.last_failure is not None
        assert after.status.last_failure.failure_class == FailureClass.STALLED
        assert after.status.last_failure.reason == "WorkersDidNotFinish"
    if phase == Phase.RUNNING and done:
        assert result.requeue_after is not None and result.requeue_after <= 10 + GRACE - seconds + 1


def test_the_grace_counts_from_the_recorded_finish_after_the_pod_is_gone() -> None:
    """Worker 1 succeeded and its pod was deleted (by someone): the record keeps when it finished, so the grace
    still ends."""
    job = running(workers=2)
    settings = replace(SETTINGS, completion_grace_seconds=GRACE)
    job, _ = step(job, pods_of(job, 1, {W1: DONE}), at(11), settings=settings)
    remaining = [p for p in pods_of(job, 1) if p["metadata"]["name"] == W0]
    after, _ = step(job, remaining, at(10 + GRACE), settings=settings)
    assert after.status is not None and after.status.phase == Phase.RESTARTING


def test_a_failure_within_the_grace_is_a_failure_as_before() -> None:
    job = running(workers=3)
    after, _ = step(job, pods_of(job, 1, {W1: DONE, W2: FAILED}), at(21))
    assert after.status is not None and after.status.phase == Phase.RESTARTING
    assert after.status.restarts.stalled == 0


def test_parameter_server_workers_finish_their_shares_apart() -> None:
    job = running(mode="ParameterServer", servers=1, workers=2)
    settings = replace(SETTINGS, completion_grace_seconds=GRACE)
    job, _ = step(job, pods_of(job, 1, {W1: DONE}), at(11), settings=settings)
    after, _ = step(job, pods_of(job, 1, {W1: DONE}), at(10 + 10 * GRACE), settings=settings)
    assert after.status is not None and after.status.phase == Phase.RUNNING


def test_only_the_first_success_keeps_its_time() -> None:
    """A gang of thousands that ends together adds one time to its status, not one per pod."""
    job = running(workers=3)
    later = {**DONE, "finished": at(12)}
    after, _ = step(job, pods_of(job, 1, {W0: later, W1: DONE, W2: later}), at(13))
    assert after.status is not None
    assert [(t.name, t.finished_at) for t in after.status.tracked_pods if t.finished_at] == [(W1, at(10))]
