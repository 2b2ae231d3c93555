"""The operator against the cluster tier (real apiserver, scheduler, garbage collector, kwok nodes)."""

import json
import time
from datetime import datetime
from typing import Any

import pytest
from testbed import pods
from testbed.controlplane import ControlPlane
from testbed.harness import Harness, condition, progress_endpoint
from testbed.kwok import gpu_node
from testbed.operator import OperatorProcess
from testbed.processes import poll_until
from tests.support import kubectl
from tests.support.builders import job_manifest

pytestmark = pytest.mark.cluster
Manifest = dict[str, Any]


def _kubectl_get(plane: ControlPlane, namespace: str, name: str, *flags: str) -> dict[str, str]:
    """The row of `kubectl get tj NAME`, by column, as the apiserver's table printer filled it."""
    (row,) = kubectl.table(kubectl.kubectl(plane.kubeconfig, "get", "tj", name, "-n", namespace, *flags))
    return row


def test_a_job_runs_to_success_reporting_progress_and_records_its_result(
    h: Harness, cluster: ControlPlane, operator: OperatorProcess
) -> None:
    h.create(job_manifest("ok"))
    running = h.wait_phase("ok", "Running")
    assert running["status"]["workers"]["ready"] == 2
    rank0, rank1 = h.wait_running_pods("ok", 2, attempt=1)
    heartbeat = float(int(time.time()) - 1)  # whole seconds: the estimate is kept to the second
    report = {"step": 42, "loss": 0.25, "heartbeat": heartbeat, "totalSteps": 168, "etaSeconds": 3600.5,
              "metrics": {"accuracy": 0.5, "bad name": 1.0, "nan": float("nan")}, "metricsStep": 40}  # fmt: skip
    with progress_endpoint(rank0.status.pod_ip, report):
        reported = h.wait("ok", lambda job: "metrics" in job["status"].get("progress", {}), "metrics reported")
    progress = reported["status"]["progress"]
    assert (progress["percent"], progress["metrics"], progress["metricsStep"]) == (25, {"accuracy": 0.5}, 40)
    eta = progress["estimatedCompletionTime"]
    assert datetime.fromisoformat(eta).timestamp() == int(heartbeat + 3600.5)  # a time, not a countdown
    wide = _kubectl_get(cluster, h.ns, "ok", "-o", "wide")
    assert (wide["STEP"], wide["PROGRESS"], wide["LOSS"], wide["ETA"]) == ("42", "25", "0.25", eta)
    assert "ETA" not in _kubectl_get(cluster, h.ns, "ok")  # -o wide only

    final = {"step": 168, "loss": 0.05, "heartbeat": time.time(), "totalSteps": 168, "finished": True,
             "metrics": {"accuracy": 0.97, "val/loss": 0.11}, "metricsStep": 168, "lastCheckpointStep": 168,
             "lastCheckpointPath": "/checkpoints/step-168", "lastCheckpointTime": time.time()}  # fmt: skip
    h.finish(rank0.metadata.name, 0, message=json.dumps(final))  # the trainer's termination message
    h.finish(rank1.metadata.name, 0)
    done = h.wait_phase("ok", "Succeeded")
    assert condition(done, "Succeeded")["status"] == "True"
    assert condition(done, "Running")["status"] == "False"
    assert done["status"]["completionTime"] >= done["status"]["startTime"]
    result = done["status"]["result"]
    assert (result["step"], result["totalSteps"], result["loss"], result["metricsStep"]) == (168, 168, 0.05, 168)
    assert result["metrics"] == {"accuracy": 0.97, "val/loss": 0.11} and result["durationSeconds"] >= 0
    assert result["checkpoint"]["path"] == "/checkpoints/step-168"
    wide = _kubectl_get(cluster, h.ns, "ok", "-o", "wide")
    assert (wide["STEP"], wide["PROGRESS"], wide["ETA"]) == ("168", "100", "")  # finished: no estimate
    assert {"JobCreated", "AllReplicasRunning"} <= set(h.wait_event("ok", "JobSucceeded"))
    log = operator.log()
    assert f"{h.ns}/ok attempt 1: JobSucceeded: All 2 workers finished successfully." in log
    assert "Handler 'pod_changed' succeeded" not in log  # the decisions, not kopf's chatter


def test_a_failed_rank_restarts_the_whole_gang(h: Harness) -> None:
    h.create(job_manifest("gang", workers=3))
    first = h.wait_running_pods("gang", 3, attempt=1)
    h.finish(first[1].metadata.name, 75)
    restarted = h.wait_phase("gang", "Running", attempt=2)
    second = h.wait_running_pods("gang", 3, attempt=2)
    assert not {p.metadata.uid for p in first} & {p.metadata.uid for p in second}
    assert restarted["status"]["restarts"]["retryable"] == 1
    assert restarted["status"]["lastFailure"]["pod"] == first[1].metadata.name
    assert [p.spec.hostname for p in second] == [p.spec.hostname for p in first]  # stable DNS across attempts


def test_backoff_limit_exhausted_fails_naming_the_last_failure(h: Harness) -> None:
    h.create(job_manifest("limited", runPolicy={"backoffLimit": 1}))
    h.finish(h.wait_running_pods("limited", 2, attempt=1)[0].metadata.name, 75)
    last = h.wait_running_pods("limited", 2, attempt=2)[1].metadata.name
    h.finish(last, 76)
    failed = h.wait_phase("limited", "Failed")
    assert condition(failed, "Failed")["reason"] == "BackoffLimitExceeded"
    assert last in condition(failed, "Failed")["message"] and "76" in condition(failed, "Failed")["message"]
    assert failed["status"]["lastFailure"]["exitCode"] == 76


def test_an_eviction_does_not_count_against_backoff_limit(h: Harness) -> None:
    h.create(job_manifest("evicted", runPolicy={"backoffLimit": 0}))
    pods.evict_pod(h.core, h.ns, h.wait_running_pods("evicted", 2, attempt=1)[0].metadata.name)
    restarted = h.wait_phase("evicted", "Running", attempt=2)
    assert restarted["status"]["restarts"]["disruption"] == 1
    assert restarted["status"]["restarts"]["retryable"] == 0


def test_a_permanent_exit_code_fails_at_once(h: Harness) -> None:
    h.create(job_manifest("broken"))
    h.finish(h.wait_running_pods("broken", 2, attempt=1)[1].metadata.name, 78)
    failed = h.wait_phase("broken", "Failed")
    assert condition(failed, "Failed")["reason"] == "PermanentFailure"
    assert failed["status"]["attempt"] == 1


def test_a_ps_worker_failure_replaces_only_that_worker(h: Harness) -> None:
    h.create(job_manifest("ps", workers=3, mode="ParameterServer", parameterServers={"replicas": 2}))
    first = {p.metadata.name: p.metadata.uid for p in h.wait_running_pods("ps", 5, attempt=1)}
    h.finish("ps-worker-1-1", 75)

    def replaced() -> dict[str, str] | None:
        now = {p.metadata.name: p.metadata.uid for p in h.pods("ps") if p.status.phase == "Running"}
        return now if len(now) == 5 and now["ps-worker-1-1"] != first["ps-worker-1-1"] else None

    second = poll_until(replaced, timeout=60, what="worker 1 replaced")
    assert {n: u for n, u in second.items() if n != "ps-worker-1-1"} == {
        n: u for n, u in first.items() if n != "ps-worker-1-1"
    }
    job = h.wait_phase("ps", "Running")
    assert job["status"]["attempt"] == 1 and job["status"]["restarts"]["retryable"] == 1


def test_suspend_and_resume(h: Harness) -> None:
    h.create(job_manifest("pausable"))
    h.wait_running_pods("pausable", 2, attempt=1)
    h.patch_spec("pausable", {"runPolicy": {"suspend": True}})
    suspended = h.wait_phase("pausable", "Suspended")
    assert condition(suspended, "Suspended")["status"] == "True"
    poll_until(lambda: not h.pods("pausable"), timeout=30, what="pods of a suspended job to go")
    h.patch_spec("pausable", {"runPolicy": {"suspend": False}})
    h.wait_running_pods("pausable", 2, attempt=2)
    resumed = h.wait_phase("pausable", "Running", attempt=2)
    assert condition(resumed, "Suspended")["status"] == "False"
    assert resumed["status"]["restarts"] == {"retryable": 0, "oom": 0, "disruption": 0, "stalled": 0}


def test_a_job_created_suspended_makes_no_pods_until_resumed(h: Harness) -> None:
    h.create(job_manifest("queued", runPolicy={"suspend": True}))
    h.wait_phase("queued", "Suspended")
    assert not h.pods("queued")
    h.patch_spec("queued", {"runPolicy": {"suspend": False}})
    h.wait_running_pods("queued", 2, attempt=1)


def test_ttl_deletes_a_finished_job(h: Harness) -> None:
    h.create(job_manifest("shortlived", runPolicy={"ttlSecondsAfterFinished": 1}))
    h.finish(h.wait_running_pods("shortlived", 2, attempt=1)[0].metadata.name, 78)
    h.wait_phase("shortlived", "Failed")
    h.wait_gone("shortlived")


def test_active_deadline_fails_the_job(h: Harness) -> None:
    h.create(job_manifest("deadline", runPolicy={"activeDeadlineSeconds": 2}))
    failed = h.wait_phase("deadline", "Failed", timeout=30)
    assert condition(failed, "Failed")["reason"] == "DeadlineExceeded"
    poll_until(lambda: not h.pods("deadline"), timeout=30, what="the running pods of a failed job to go")


def test_an_unschedulable_job_reaches_its_startup_deadline_and_says_why(h: Harness) -> None:
    # The message quotes the scheduler's verdict on the pod as the operator last saw it: the deadline leaves the
    # scheduler ample time to give it (3 s did not always, on a loaded machine).
    manifest = job_manifest("toobig", runPolicy={"startupDeadlineSeconds": 10})
    manifest["spec"]["workers"]["resources"] = {"limits": {"nvidia.com/gpu": 16}}  # the nodes have 8 each
    h.create(manifest)
    failed = h.wait_phase("toobig", "Failed", timeout=45)
    message = condition(failed, "Failed")["message"]
    assert condition(failed, "Failed")["reason"] == "StartupDeadlineExceeded"
    assert "nvidia.com/gpu" in message


def test_a_node_lost_under_running_pods_restarts_the_gang(h: Harness) -> None:
    node = "lost-node"
    h.core.create_node(gpu_node(node, "127.0.10.98"))
    try:
        manifest = job_manifest("orphaned")
        manifest["spec"]["workers"]["nodeSelector"] = {"kubernetes.io/hostname": node}
        h.create(manifest)
        h.wait_running_pods("orphaned", 2, attempt=1)
    finally:
        pods.remove_node(h.core, node)
    h.wait(
        "orphaned",
        lambda job: (job.get("status") or {}).get("restarts", {}).get("disruption") == 1,
        "a disruption restart after the node went",
        timeout=150,
    )
    job = h.job("orphaned")
    assert job["status"]["restarts"]["retryable"] == 0 and job["status"]["attempt"] == 2


def test_operator_killed_mid_attempt_makes_no_duplicates(h: Harness, operator: OperatorProcess) -> None:
    h.create(job_manifest("survivor", workers=4))
    first = h.wait_running_pods("survivor", 4, attempt=1)
    operator.kill()
    h.finish(first[2].metadata.name, 75)  # fails while no operator is watching
    operator.start()
    h.wait_phase("survivor", "Running", attempt=2)
    second = h.wait_running_pods("survivor", 4, attempt=2)
    assert len({p.metadata.name for p in second}) == 4
    assert h.job("survivor")["status"]["restarts"]["retryable"] == 1
    operator.kill()  # again, right after a restart was written: nothing is counted twice
    operator.start()
    # A spec edit the new process must answer (observedGeneration 2) proves it reconciled this job.
    h.patch_spec("survivor", {"runPolicy": {"backoffLimit": 4}})
    h.wait(
        "survivor",
        lambda job: (job.get("status") or {}).get("observedGeneration") == 2,
        "the restarted operator to reconcile",
    )
    assert h.job("survivor")["status"]["restarts"]["retryable"] == 1
    assert sorted(p.metadata.name for p in h.pods("survivor")) == [p.metadata.name for p in second]


def test_progress_is_reported_and_a_stalled_trainer_restarts_the_gang(h: Harness) -> None:
    h.create(job_manifest("stalling", runPolicy={"progressDeadlineSeconds": 3}))
    rank0 = h.wait_running_pods("stalling", 2, attempt=1)[0]
    report = {"step": 42, "loss": 0.25, "samplesPerSecond": 1000.0, "heartbeat": time.time()}
    with progress_endpoint(rank0.status.pod_ip, report):  # the heartbeat never moves again: a hang
        reported = h.wait(
            "stalling", lambda job: (job.get("status") or {}).get("progress", {}).get("step") == 42, "step 42 reported"
        )
        assert reported["status"]["progress"]["samplesPerSecond"] == 1000.0
        restarted = h.wait(
            "stalling", lambda job: (job.get("status") or {}).get("attempt") == 2, "a restart after the stall"
        )
    assert restarted["status"]["restarts"]["stalled"] == 1
    assert restarted["status"]["lastFailure"]["failureClass"] == "Stalled"


def test_a_trainer_on_a_node_ten_minutes_behind_is_judged_on_the_operators_clock(h: Harness) -> None:
    """Its heartbeats are all older than progressDeadlineSeconds by its node's clock, yet each is news when it
    comes: the job runs on while they come, and restarts as Stalled once they stop."""
    h.create(job_manifest("skewed", runPolicy={"progressDeadlineSeconds": 3}))
    rank0 = h.wait_running_pods("skewed", 2, attempt=1)[0]
    report: dict[str, float] = {"step": 1, "heartbeat": time.time() - 600}
    with progress_endpoint(rank0.status.pod_ip, report):
        h.wait("skewed", lambda job: (job.get("status") or {}).get("progress", {}).get("step") == 1, "step 1 reported")
        until = time.monotonic() + 9  # three deadlines
        while time.monotonic() < until:
            time.sleep(0.5)  # the trainer's pace: a step and a heartbeat every half second
            report.update(step=report["step"] + 1, heartbeat=time.time() - 600)
        status = h.job("skewed")["status"]
        assert status["attempt"] == 1 and status["restarts"].get("stalled", 0) == 0, status
        changed = datetime.fromisoformat(status["progress"]["lastChangeTime"]).timestamp()
        heartbeat = datetime.fromisoformat(status["progress"]["lastHeartbeatTime"]).timestamp()
        assert changed - heartbeat > 590, status["progress"]
        stalled = h.wait("skewed", lambda job: (job.get("status") or {}).get("attempt") == 2, "a stall once quiet")
    assert stalled["status"]["restarts"]["stalled"] == 1


def test_metrics_count_jobs_and_restarts(h: Harness, operator: OperatorProcess) -> None:
    h.create(job_manifest("measured"))
    h.finish(h.wait_running_pods("measured", 2, attempt=1)[0].metadata.name, 75)
    h.wait_phase("measured", "Running", attempt=2)

    def scraped() -> str | None:
        status, text = operator.scrape(timeout=2)
        return text if status == 200 and 'trainingjob_restarts_total{failure_class="retryable"}' in text else None

    text = poll_until(scraped, timeout=20, what="the restart counted in /metrics")
    assert 'trainingjob_jobs{phase="Running"}' in text
    assert "trainingjob_reconcile_duration_seconds_count" in text
