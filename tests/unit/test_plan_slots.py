"""plan/slots.py: a pass lays the slots out once for each attempt and set of finished pods that its policies ask
about, and answers each status by its own: a memory of the pass's first answer never stands for a later status."""

import pytest
from tests.support.builders import T0, make_job, pods_of, seen

from trainingjob.model import TrainingJobStatus
from trainingjob.model.tracked import PodOutcome, TrackedPod
from trainingjob.plan.slots import slots
from trainingjob.plan.types import Context, Settings

pytestmark = pytest.mark.fast
JOB = make_job(workers=3)


def test_each_status_gets_its_own_slots_within_one_pass() -> None:
    ctx = Context(JOB, seen(pods_of(JOB, 1)[:2]), T0, Settings())  # worker 2's pod is not created yet
    running = TrainingJobStatus(attempt=1)
    assert [(s.name, s.is_up, s.is_missing) for s in slots(ctx, running)] == [
        ("job-worker-0-1", True, False),
        ("job-worker-1-1", True, False),
        ("job-worker-2-1", False, True),
    ]
    finished = TrackedPod(name="job-worker-2-1", uid="uid-gone", outcome=PodOutcome.SUCCEEDED)
    recorded = TrainingJobStatus(attempt=1, tracked_pods=[finished])
    assert [s.done for s in slots(ctx, recorded)] == [False, False, True], "a later status's finished pod"
    assert [s.name for s in slots(ctx, TrainingJobStatus(attempt=2))] == [f"job-worker-{i}-2" for i in range(3)]
    answer = slots(ctx, running)
    answer.clear()  # a caller's list is its own
    assert len(slots(ctx, running)) == 3
