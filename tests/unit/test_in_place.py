"""Restarts in place through the real reconcile and planner against the in-memory cluster: a trainer failure in a
healthy gang is counted once and restarts in the same pods; the order reaches rank 0's agent even when the operator
dies after recording it; pods that do not come back fall back to new pods without a second count; a stall restarts
in place; and what keeps a gang from restarting in place (a failed pod, parameter-server mode, the setting off)."""

from dataclasses import replace
from typing import Any

import pytest
from tests.support.builders import SETTINGS, job_manifest
from tests.support.reconcile_world import NS, ReconcileWorld

from trainingjob.children.agent import Gang, GangState, RankFailure
from trainingjob.children.progress_report import progress_from_report
from trainingjob.plan.failure import PEER_LOST_WAIT_SECONDS

pytestmark = pytest.mark.fast

RANK0 = "job-worker-0-1"
BACKOFF = SETTINGS.backoff_base_seconds


class World(ReconcileWorld):
    def start(self, **spec: Any) -> None:
        self.cluster.submit(job_manifest(namespace=NS, **spec))
        self.reconcile()
        for key in list(self.cluster.pods):
            self.cluster.run(*key)
        self.reconcile()
        assert self.status["phase"] == "Running"
        self.cluster.gangs[RANK0] = Gang(1, GangState.RUNNING, len(self.cluster.pods), len(self.cluster.pods))

    def trainer_fails(self, rank: int = 1, code: int = 137) -> None:
        gang = self.cluster.gangs[RANK0]
        failure = RankFailure(rank, code, self.now.timestamp())
        self.cluster.gangs[RANK0] = replace(gang, state=GangState.FAILED, failures=(failure,))
        self.cluster.pods[(NS, RANK0)]["status"]["conditions"] = [{"type": "Ready", "status": "False"}]

    def agents_run(self, running: int | None = None) -> None:
        gang = self.cluster.gangs[RANK0]
        count = gang.pods if running is None else running
        self.cluster.gangs[RANK0] = replace(gang, state=GangState.RUNNING, running=count)


@pytest.fixture
def world() -> World:
    return World()


def test_a_trainer_failure_restarts_the_gang_in_its_pods_counted_once(world: World) -> None:
    world.start()
    world.advance(1)
    world.trainer_fails(rank=1, code=137)
    world.reconcile()
    status = world.status
    assert (status["attempt"], status["podsAttempt"], status["inPlaceRestarts"]) == (2, 1, 1)
    assert status["restarts"]["retryable"] == 1 and status["phase"] == "Restarting"
    assert status["lastFailure"] | {"time": None} == status["lastFailure"] | {
        "pod": "job-worker-1-1", "attempt": 1, "exitCode": 137, "failureClass": "Retryable", "time": None,
    }  # fmt: skip
    assert world.pods == ["job-worker-0-1", "job-worker-1-1"] and not world.cluster.orders  # within the backoff
    world.advance(1)
    world.reconcile()  # the failure is on record: nothing is counted again while the agents wait
    assert world.status["restarts"]["retryable"] == 1 and not world.cluster.orders
    world.advance(BACKOFF)
    world.reconcile()
    assert world.cluster.orders == [(RANK0, 2)] and world.status["phase"] == "Restarting"
    world.agents_run()
    world.advance(0.5)
    world.reconcile()
    status = world.status
    assert status["phase"] == "Running" and "inPlaceRestart" not in status and status["attempt"] == 2
    assert world.pods == ["job-worker-0-1", "job-worker-1-1"], "no pod was deleted or created"
    assert status["history"]["attempts"][-1]["inPlace"] is True
    assert world.reasons()[-2:] == ["RetryableFailure", "RestartedInPlace"]  # one Event for Running again


def test_an_attempt_that_saved_restarts_in_place_at_once_and_a_crash_loop_still_waits(world: World) -> None:
    """Attempt 1 moved the newest checkpoint forward: attempt 2 is ordered on the pass after the record, with no
    backoff. Attempt 2 fails before saving anything: the crash loop's backoff applies as before (the second failure
    of a streak that began with the one that saved: twice the base)."""
    world.start()
    report = {"step": 120, "heartbeat": world.now.timestamp(), "attempt": 1, "lastCheckpointStep": 100}
    world.cluster.reports[RANK0] = progress_from_report(report | {"lastCheckpointTime": world.now.timestamp()})
    world.reconcile()
    world.trainer_fails()
    world.reconcile()
    assert world.status["lastCheckpoint"]["step"] == 100 and not world.cluster.orders
    world.advance(0.1)
    world.reconcile()
    assert world.cluster.orders == [(RANK0, 2)], "no backoff after an attempt that saved"
    world.agents_run()
    world.reconcile()
    assert (world.status["phase"], world.status["attempt"]) == ("Running", 2)
    resumed = report | {"step": 100, "attempt": 2, "resumedFromStep": 100}
    world.cluster.reports[RANK0] = progress_from_report(resumed | {"heartbeat": world.now.timestamp()})
    world.reconcile()
    world.trainer_fails()
    world.reconcile()
    world.advance(2 * BACKOFF - 0.5)
    world.reconcile()
    assert world.status["attempt"] == 3 and world.cluster.orders == [(RANK0, 2)], "within the crash loop's backoff"
    world.advance(0.6)
    world.reconcile()
    assert world.cluster.orders[-1] == (RANK0, 3)


@pytest.mark.parametrize("crash_after", range(3), ids=lambda n: f"killed-after-{n}-operations")
def test_an_operator_killed_between_recording_and_telling_tells_on_its_next_pass(
    world: World, crash_after: int
) -> None:
    world.start()
    world.told_despite_a_crash(RANK0, crash_after, BACKOFF)
    world.agents_run()
    world.reconcile()
    assert (world.status["attempt"], world.status["restarts"]["retryable"], world.status["phase"]) == (2, 1, "Running")


def test_pods_that_do_not_all_come_back_fall_back_to_new_pods_counted_once(world: World) -> None:
    world.start()
    world.trainer_fails()
    world.reconcile()
    world.advance(BACKOFF)
    world.reconcile()
    world.agents_run(running=1)  # one pod's agent never starts the attempt
    world.advance(SETTINGS.in_place_timeout_seconds + 0.1)
    world.reconcile()
    status = world.status
    assert "InPlaceRestartTimedOut" in world.reasons() and "podsAttempt" not in status
    assert (status["attempt"], status["restarts"]["retryable"], status["inPlaceRestarts"]) == (2, 1, 1)
    assert all(world.cluster.pods[key]["metadata"].get("deletionTimestamp") for key in world.cluster.pods)
    world.cluster.reap_terminating()
    world.reconcile()
    assert world.pods == ["job-worker-0-2", "job-worker-1-2"], "attempt 2 got pods of its own"
    assert world.status["history"]["attempts"][-1]["inPlace"] is False


def test_a_second_failure_of_the_restarted_attempt_is_a_second_restart(world: World) -> None:
    world.start()
    world.trainer_fails()
    world.reconcile()
    world.advance(BACKOFF)
    world.reconcile()
    world.agents_run()
    world.reconcile()
    world.advance(5)
    world.trainer_fails(rank=0, code=75)
    world.advance(PEER_LOST_WAIT_SECONDS)  # no rank was reported dead meanwhile: rank 0 is the root cause
    world.reconcile()
    status = world.status
    assert (status["attempt"], status["restarts"]["retryable"], status["inPlaceRestarts"]) == (3, 2, 2)
    assert status["lastFailure"]["attempt"] == 2 and status["podsAttempt"] == 1


def test_a_stalled_gang_restarts_in_place(world: World) -> None:
    world.start(runPolicy={"progressDeadlineSeconds": 30})
    report = {"step": 5, "heartbeat": world.now.timestamp(), "attempt": 1}
    world.cluster.reports[RANK0] = progress_from_report(report)
    world.reconcile()
    world.advance(31)
    world.reconcile()
    status = world.status
    assert (status["attempt"], status["restarts"]["stalled"], status["inPlaceRestarts"]) == (2, 1, 1)
    assert world.pods == ["job-worker-0-1", "job-worker-1-1"]


def test_a_permanent_exit_fails_the_job(world: World) -> None:
    world.start()
    world.trainer_fails(code=78)
    world.reconcile()
    assert world.status["phase"] == "Failed" and world.status["lastFailure"]["failureClass"] == "Permanent"


@pytest.mark.parametrize(
    "case",
    ["a-pod-failed", "in-place-off", "agent-silent"],
)
def test_what_keeps_a_gang_from_restarting_in_place(case: str) -> None:
    world = World(replace(SETTINGS, in_place_restart=False) if case == "in-place-off" else SETTINGS)
    world.start()
    if case == "a-pod-failed":
        world.cluster.finish(NS, "job-worker-1-1", 137)
    elif case == "agent-silent":
        world.trainer_fails()
        del world.cluster.gangs[RANK0]
    else:
        world.trainer_fails()
    world.reconcile()
    status = world.status
    assert status.get("inPlaceRestarts", 0) == 0 and "podsAttempt" not in status
    if case == "a-pod-failed":
        assert status["attempt"] == 2 and all(
            p["metadata"].get("deletionTimestamp") for p in world.cluster.pods.values()
        )
    else:
        assert status["attempt"] == 1, "nothing restarts until the pod itself fails"


def test_pods_are_made_with_an_agent_only_for_ddp_and_the_trainers_own_command() -> None:
    ps = {"mode": "ParameterServer", "servers": 1}  # its workers restart in place, its servers never
    cases: list[tuple[dict[str, Any], set[str | None]]] = [({}, {"true"}), (ps, {"true", None})]
    for spec, expected in cases:
        world = World()
        world.cluster.submit(job_manifest(namespace=NS, **spec))
        world.reconcile()
        labels = {p["metadata"]["labels"].get("trainingjob.io/in-place") for p in world.cluster.pods.values()}
        assert labels == expected, spec


def test_an_agent_that_never_answers_falls_back_to_new_pods_within_seconds(world: World) -> None:
    world.start(runPolicy={"progressDeadlineSeconds": 30})
    del world.cluster.gangs[RANK0]  # pods of an image without the agent: nothing answers on its port
    world.cluster.reports[RANK0] = progress_from_report({"step": 5, "heartbeat": world.now.timestamp(), "attempt": 1})
    world.reconcile()
    world.advance(31)
    world.reconcile()
    assert world.status["inPlaceRestart"]["attempt"] == 2
    world.advance(BACKOFF + 4)
    world.reconcile()
    assert "podsAttempt" in world.status, "a silent agent is given a few seconds"
    world.advance(1.1)
    world.reconcile()
    assert "podsAttempt" not in world.status and world.reasons()[-1] == "InPlaceRestartTimedOut"
    assert world.status["restarts"]["stalled"] == 1


def test_a_pod_that_fails_while_its_gang_restarts_in_place_is_the_same_failure(world: World) -> None:
    """Rank 1's container dies: rank 0's trainer says it lost its peer long before the kubelet says the pod failed. One
    restart, with new pods, blamed on the pod that failed."""
    world.start()
    world.trainer_fails(rank=0, code=75)
    world.advance(PEER_LOST_WAIT_SECONDS)  # no rank was reported dead meanwhile: rank 0 is the root cause
    world.reconcile()
    assert world.status["inPlaceRestart"]["attempt"] == 2 and world.status["restarts"]["retryable"] == 1
    world.cluster.finish(NS, "job-worker-1-1", 137)
    world.reconcile()
    status = world.status
    assert (status["attempt"], status["restarts"]["retryable"], status["inPlaceRestarts"]) == (2, 1, 1)
    assert "podsAttempt" not in status and world.reasons()[-1] == "InPlaceRestartAbandoned"
    assert (status["lastFailure"]["pod"], status["lastFailure"]["exitCode"]) == ("job-worker-1-1", 137)
    world.cluster.reap_terminating()
    world.advance(BACKOFF)
    world.reconcile()
    assert world.pods == ["job-worker-0-2", "job-worker-1-2"]


def test_a_permanent_pod_failure_while_restarting_in_place_fails_the_job(world: World) -> None:
    world.start()
    world.trainer_fails(rank=0, code=75)
    world.advance(PEER_LOST_WAIT_SECONDS)  # no rank was reported dead meanwhile: rank 0 is the root cause
    world.reconcile()
    world.cluster.finish(NS, "job-worker-1-1", 78)
    world.reconcile()
    assert world.status["phase"] == "Failed" and world.status["lastFailure"]["failureClass"] == "Permanent"
