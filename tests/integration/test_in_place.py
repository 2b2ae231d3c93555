"""A restart in place on the cluster tier (real apiserver, scheduler and kwok nodes; rank 0's agent played on its
pod's IP): the trainer fails in a healthy gang, the operator counts it, tells the agent with an order signed by the
job's key, and the job runs again as attempt 2 in the same pods: no pod deleted or created. A parameter-server
worker's trainer restarts in its pod the same way, alone, as its next incarnation."""

import time

import pytest
from testbed import pods
from testbed.fake_agent import fake_agent
from testbed.harness import Harness
from testbed.operator import OperatorProcess
from tests.support.builders import job_manifest

from trainingjob.children.agent import job_key

pytestmark = pytest.mark.cluster


def test_a_trainer_failure_restarts_the_gang_in_its_pods(h: Harness, operator: OperatorProcess) -> None:
    h.create(job_manifest("steady", workers=2))
    running = h.wait_running_pods("steady", 2, attempt=1)
    uids = sorted(p.metadata.uid for p in running)
    key = job_key(operator.key, h.job("steady")["metadata"]["uid"])
    gang = {"attempt": 1, "state": "running", "pods": 2, "running": 2, "failures": []}
    with fake_agent(running[0].status.pod_ip, key, **gang) as agent:
        agent.set(state="failed", failures=[{"rank": 1, "exitCode": 137, "time": time.time()}])
        pods.set_ready(h.core, h.ns, running[0].metadata.name, False)  # the agent's readiness probe fails
        restarting = h.wait_phase("steady", "Restarting", attempt=2, podsAttempt=1, inPlaceRestarts=1)
        assert restarting["status"]["restarts"]["retryable"] == 1
        assert restarting["status"]["lastFailure"]["pod"] == "steady-worker-1-1"
        h.wait("steady", lambda _: agent.orders == [2] or 2 in agent.orders, "rank 0's agent told to run attempt 2")
        assert agent.refused == 0, "an order the agent could not verify with the job's key"
        agent.set(state="running", running=2)
        pods.set_ready(h.core, h.ns, running[0].metadata.name, True)
        ran = h.wait_phase("steady", "Running", attempt=2)
    assert "inPlaceRestart" not in ran["status"] and ran["status"]["restarts"]["retryable"] == 1
    assert sorted(p.metadata.uid for p in h.pods("steady")) == uids, "a pod was deleted or created"
    assert "RestartedInPlace" in h.wait_event("steady", "RestartedInPlace")


def test_a_parameter_server_workers_trainer_failure_restarts_it_in_its_pod(
    h: Harness, operator: OperatorProcess
) -> None:
    """Worker 1's agent (a gang of one) says its trainer failed: counted once, recorded as its incarnation 2, its
    agent told; the job's attempt, phase and every pod stay."""
    h.create(job_manifest("async", mode="ParameterServer", workers=2, servers=1))
    running = h.wait_running_pods("async", 3, attempt=1)
    uids, worker1 = sorted(p.metadata.uid for p in running), "async-worker-1-1"
    address = next(p.status.pod_ip for p in running if p.metadata.name == worker1)
    key = job_key(operator.key, h.job("async")["metadata"]["uid"])
    with fake_agent(address, key, attempt=1, state="running", pods=1, running=1, failures=[]) as agent:
        h.wait_phase("async", "Running")
        agent.set(state="failed", failures=[{"rank": 0, "exitCode": 137, "time": time.time()}])
        pods.set_ready(h.core, h.ns, worker1, False)  # the agent's readiness probe fails
        counted = h.wait("async", lambda job: job["status"].get("inPlaceRestarts") == 1, "the restart counted")
        status = counted["status"]
        assert (status["attempt"], status["restarts"]["retryable"], status["phase"]) == (1, 1, "Running")
        assert (status["lastFailure"]["pod"], status["lastFailure"]["reason"]) == (worker1, "TrainerFailed")
        tracked = next(t for t in status["trackedPods"] if t["name"] == worker1)
        assert tracked["incarnation"] == 2 and "restartingSince" in tracked
        h.wait("async", lambda _: 2 in agent.orders, "worker 1's agent told to run incarnation 2")
        assert agent.refused == 0, "an order the agent could not verify with the job's key"
        agent.set(state="running", running=1)
        h.wait(
            "async",
            lambda job: all("restartingSince" not in t for t in job["status"]["trackedPods"]),
            "worker 1 running its incarnation 2",
        )
    assert sorted(p.metadata.uid for p in h.pods("async")) == uids, "a pod was deleted or created"
    assert h.job("async")["status"]["restarts"]["retryable"] == 1
    assert "RestartedInPlace" in h.wait_event("async", "RestartedInPlace")
