"""reconcile/status_pace.py: a change of the counts alone (the replica counts, the Running condition's message) is
written at most once a pace per job; everything else, and a pass that does anything beside its status, at once."""

from typing import Any

import pytest
from tests.support.builders import SETTINGS, T0, at, job_manifest
from tests.support.fake_cluster import FakeCluster

from trainingjob.model import ConditionType, TrainingJobStatus
from trainingjob.plan import Event, Plan
from trainingjob.reconcile.job import reconcile
from trainingjob.reconcile.status_pace import StatusPace, counts_only

pytestmark = pytest.mark.fast
NS, KEY = "ns", ("ns", "job")
RUNNING = ConditionType.RUNNING.value


def status(**change: Any) -> dict[str, Any]:
    """A Pending job's status as the API holds it, 2 of 8 pods running, with `change` applied."""
    base: dict[str, Any] = {
        "phase": "Pending",
        "attempt": 1,
        "workers": {"active": 8, "ready": 2},
        "conditions": [
            {"type": "Created", "status": "True", "reason": "PodsCreated", "message": "All 8 pods were created."},
            {"type": RUNNING, "status": "False", "reason": "PodsNotRunning", "message": "2 of 8 pods are running."},
        ],
    }
    return base | change


def running_condition(**change: Any) -> list[dict[str, Any]]:
    created, running = status()["conditions"]
    return [created, running | change]


@pytest.mark.parametrize(
    ("new", "only_counts"),
    [
        pytest.param(status(workers={"active": 8, "ready": 3}), True, id="ready-count"),
        pytest.param(status(conditions=running_condition(message="3 of 8 pods are running.")), True, id="message"),
        pytest.param(status(parameterServers={"active": 1}), True, id="parameter-server-count"),
        pytest.param(status(conditions=running_condition(reason="ReplacingPods")), False, id="running-reason"),
        pytest.param(status(conditions=running_condition(status="True")), False, id="running-status"),
        pytest.param(status(phase="Running"), False, id="phase"),
        pytest.param(status(attempt=2), False, id="attempt"),
        pytest.param(
            status(conditions=[status()["conditions"][0] | {"message": "Creating 8 pods."}, status()["conditions"][1]]),
            False,
            id="another-conditions-message",
        ),
        pytest.param(status(progress={"step": 10}), False, id="progress"),
        pytest.param(status(goodput={"wallSeconds": 2}), True, id="goodput-moving-with-the-clock"),
    ],
)
def test_only_the_counts_and_the_running_message_count_as_counts(new: dict[str, Any], only_counts: bool) -> None:
    assert counts_only(status(), new) is only_counts


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


COUNTS_ONLY = status(workers={"active": 8, "ready": 3})
STATUS_ONLY = Plan(status=TrainingJobStatus())
ANNOUNCES = Plan(status=TrainingJobStatus(), events=(Event("Normal", "JobCreated", "Creating the pods."),))


@pytest.mark.parametrize(
    ("wrote", "elapsed", "new", "plan", "held"),
    [
        pytest.param(True, 0.25, COUNTS_ONLY, STATUS_ONLY, 0.75, id="counts-soon-after-a-write"),
        pytest.param(True, 1.0, COUNTS_ONLY, STATUS_ONLY, None, id="counts-a-pace-after"),
        pytest.param(False, 0.0, COUNTS_ONLY, STATUS_ONLY, None, id="counts-never-written-before"),
        pytest.param(True, 0.25, status(phase="Running"), STATUS_ONLY, None, id="phase-at-once"),
        pytest.param(True, 0.25, status(), STATUS_ONLY, None, id="nothing-to-write"),
        pytest.param(
            True, 0.25, COUNTS_ONLY, Plan(status=TrainingJobStatus(), create=({"kind": "Pod"},)), None, id="creates"
        ),
        pytest.param(True, 0.25, COUNTS_ONLY, ANNOUNCES, None, id="announces"),
        pytest.param(True, 0.25, COUNTS_ONLY, Plan(status=TrainingJobStatus(), delete=("p",)), None, id="deletes"),
    ],
)
def test_a_counts_only_write_waits_out_the_pace_and_nothing_else_waits(
    wrote: bool, elapsed: float, new: dict[str, Any], plan: Plan, held: float | None
) -> None:
    clock = Clock()
    pace = StatusPace(1.0, clock)
    if wrote:
        pace.wrote(KEY)
    clock.now += elapsed
    assert pace.hold(KEY, status(), new, plan) == held


def test_a_forgotten_job_writes_at_once() -> None:
    pace = StatusPace(1.0, Clock())
    pace.wrote(KEY)
    pace.forget(KEY)
    assert pace.hold(KEY, status(), COUNTS_ONLY, STATUS_ONLY) is None


def test_a_gang_coming_up_writes_its_counts_once_a_pace_and_its_running_at_once() -> None:
    clock = Clock()
    pace, cluster = StatusPace(1.0, clock), FakeCluster(clock=lambda: T0)
    cluster.submit(job_manifest(namespace=NS, workers=4))

    def step() -> float | None:  # the job's clock moves with the pace's, so goodput's whole seconds move too
        now = at(clock.now - 100.0)
        return reconcile(cluster, NS, "job", now=now, settings=SETTINGS, pace=pace).requeue_after

    step()  # creates the pods, and records them: all created
    assert cluster.status_writes == 2 and cluster.job_status(NS, "job")["conditions"][0]["status"] == "True"
    step()  # sees them Pending: the counts alone change
    cluster.run(NS, "job-worker-0-1")
    step()
    written, said = cluster.status_writes, cluster.job_status(NS, "job")["workers"]
    cluster.run(NS, "job-worker-1-1")
    clock.now += 0.5
    requeue = step()
    assert cluster.status_writes == written, "a second pod running, half a pace after the last write: held back"
    assert cluster.job_status(NS, "job")["workers"] == said
    assert requeue is not None and requeue <= 0.5, "the job comes back when the pace is over"
    clock.now += 0.5
    step()
    assert cluster.status_writes == written + 1 and cluster.job_status(NS, "job")["workers"]["ready"] == 2
    cluster.run(NS, "job-worker-2-1")
    cluster.run(NS, "job-worker-3-1")
    step()  # at once, though the pace is not over: the phase changes
    assert cluster.status_writes == written + 2 and cluster.job_status(NS, "job")["phase"] == "Running"
