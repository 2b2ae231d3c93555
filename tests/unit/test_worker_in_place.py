"""Parameter-server workers restart in place, through the real reconcile and planner against the in-memory cluster:
a worker's trainer failure in its healthy pod is counted once, recorded as its next incarnation on its tracked pod,
and its agent told after the worker's backoff, even when the operator dies between recording and telling; the job's
attempt and every other pod stay; a worker that does not come back gets a new pod without a second count, as does
one whose pod fails meanwhile; a permanent exit fails the job; parameter servers never get an agent."""

from dataclasses import replace
from typing import Any

import pytest
from tests.support.builders import SETTINGS, job_manifest, tracked_records
from tests.support.reconcile_world import NS, ReconcileWorld

from trainingjob.children.agent import Gang, GangState, RankFailure

pytestmark = pytest.mark.fast

WORKER0, WORKER1, SERVER = "job-worker-0-1", "job-worker-1-1", "job-ps-0-1"
BACKOFF = SETTINGS.backoff_base_seconds


class World(ReconcileWorld):
    def start(self) -> None:
        self.cluster.submit(job_manifest(namespace=NS, mode="ParameterServer", servers=1))
        self.reconcile()
        for key in list(self.cluster.pods):
            self.cluster.run(*key)
        self.reconcile()
        assert self.status["phase"] == "Running"
        for worker in (WORKER0, WORKER1):
            self.cluster.gangs[worker] = Gang(1, GangState.RUNNING, 1, 1)

    def trainer_fails(self, pod: str = WORKER1, code: int = 137) -> None:
        gang = self.cluster.gangs[pod]
        failure = RankFailure(0, code, self.now.timestamp())
        self.cluster.gangs[pod] = replace(gang, state=GangState.FAILED, failures=(failure,))
        self.cluster.pods[(NS, pod)]["status"]["conditions"] = [{"type": "Ready", "status": "False"}]

    def agent_runs(self, pod: str = WORKER1) -> None:
        self.cluster.gangs[pod] = replace(self.cluster.gangs[pod], state=GangState.RUNNING, running=1)

    def tracked(self, pod: str = WORKER1) -> dict[str, Any]:
        record = next(t for t in tracked_records(self.status) if t.name == pod)
        return record.model_dump(mode="json", exclude_none=True)


@pytest.fixture
def world() -> World:
    world = World()
    world.start()
    return world


def test_a_worker_trainer_failure_restarts_it_in_place_counted_once(world: World) -> None:
    pods, events = world.pods, len(world.cluster.events)
    world.advance(1)
    world.trainer_fails()
    world.reconcile()
    status = world.status
    assert (status["attempt"], status["inPlaceRestarts"], status["restarts"]["retryable"]) == (1, 1, 1)
    assert world.tracked()["incarnation"] == 2 and "restartingSince" in world.tracked()
    assert "incarnation" not in world.tracked(WORKER0)
    assert (status["lastFailure"]["pod"], status["lastFailure"]["exitCode"]) == (WORKER1, 137)
    assert status["lastFailure"]["reason"] == "TrainerFailed" and status["phase"] == "Running"
    assert not world.cluster.orders  # within the worker's backoff
    world.advance(1)
    world.reconcile()  # on record: not counted again while the agent waits
    assert world.status["restarts"]["retryable"] == 1 and not world.cluster.orders
    world.advance(BACKOFF)
    world.reconcile()
    assert world.cluster.orders == [(WORKER1, 2)]
    world.agent_runs()
    world.advance(0.5)
    world.reconcile()
    status = world.status
    assert "restartingSince" not in world.tracked() and world.tracked()["incarnation"] == 2
    assert world.pods == pods, "no pod was deleted or created"
    assert [e.reason for _, e in world.cluster.events[events:]] == ["RetryableFailure", "RestartedInPlace"]
    assert [f["pod"] for f in status["history"]["failures"]] == [WORKER1]
    assert (status["attempt"], status["restarts"]["retryable"], status["inPlaceRestarts"]) == (1, 1, 1)

    world.advance(5)
    world.trainer_fails(code=1)  # incarnation 2 fails too: a second restart, as incarnation 3
    world.reconcile()
    assert (world.status["inPlaceRestarts"], world.status["restarts"]["retryable"]) == (2, 2)
    assert world.tracked()["incarnation"] == 3


@pytest.mark.parametrize("crash_after", range(3), ids=lambda n: f"killed-after-{n}-operations")
def test_an_operator_killed_between_recording_and_telling_tells_on_its_next_pass(
    world: World, crash_after: int
) -> None:
    world.told_despite_a_crash(WORKER1, crash_after, BACKOFF)
    world.agent_runs()
    world.reconcile()
    status = world.status
    assert (status["inPlaceRestarts"], status["restarts"]["retryable"]) == (1, 1)
    assert "restartingSince" not in world.tracked() and world.reasons().count("RestartedInPlace") == 1


def test_a_worker_that_does_not_come_back_gets_a_new_pod_counted_once(world: World) -> None:
    world.trainer_fails()
    world.reconcile()
    world.advance(BACKOFF + 0.1)
    world.reconcile()
    assert world.cluster.orders == [(WORKER1, 2)]  # its agent takes it but never runs it
    world.advance(SETTINGS.in_place_timeout_seconds + 0.1)
    world.reconcile()
    assert world.reasons()[-1] == "InPlaceRestartTimedOut"
    assert world.cluster.pods[(NS, WORKER1)]["metadata"].get("deletionTimestamp")
    assert not world.cluster.pods[(NS, WORKER0)]["metadata"].get("deletionTimestamp")
    world.cluster.reap_terminating()
    world.reconcile()
    status = world.status
    assert WORKER1 in world.pods and (status["restarts"]["retryable"], status["attempt"]) == (1, 1)
    assert "incarnation" not in world.tracked(), "the new pod starts afresh"


def test_a_worker_pod_that_fails_while_it_restarts_in_place_is_the_same_failure(world: World) -> None:
    world.trainer_fails()
    world.reconcile()
    world.cluster.finish(NS, WORKER1, 137)  # its agent gave up
    world.reconcile()
    status = world.status
    assert (status["restarts"]["retryable"], status["inPlaceRestarts"]) == (1, 1)
    assert world.reasons()[-1] == "InPlaceRestartAbandoned"
    world.cluster.reap_terminating()
    world.advance(BACKOFF)
    world.reconcile()
    assert WORKER1 in world.pods and world.status["restarts"]["retryable"] == 1


def test_a_permanent_exit_fails_the_job(world: World) -> None:
    world.trainer_fails(code=78)
    world.reconcile()
    assert world.status["phase"] == "Failed" and world.status["lastFailure"]["failureClass"] == "Permanent"


def test_a_ready_worker_is_not_asked_and_a_server_has_no_agent(world: World) -> None:
    world.cluster.gangs[WORKER1] = Gang(1, GangState.FAILED, 1, 0, (RankFailure(0, 137, None),))
    world.reconcile()  # its pod is still ready: its agent is not read, nothing is counted
    assert world.status.get("inPlaceRestarts", 0) == 0
    labels = {
        name: p["metadata"]["labels"].get("trainingjob.io/in-place") for (_, name), p in world.cluster.pods.items()
    }
    assert labels == {WORKER0: "true", WORKER1: "true", SERVER: None}
    probes = {name: "readinessProbe" in p["spec"]["containers"][0] for (_, name), p in world.cluster.pods.items()}
    assert probes == {WORKER0: True, WORKER1: True, SERVER: False}
