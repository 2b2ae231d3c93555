"""The timeline: a job's history and its pods on a time axis, and the same as a Chrome trace."""

import json
from typing import Any

import pytest
from tests.support.builders import T0, at, make_job, pod, pods_of, running, step, with_policy

from trainingjob.children import timeline
from trainingjob.children.naming import Replica
from trainingjob.model import CheckpointStatus, Progress, TrainingJob

pytestmark = pytest.mark.fast


def _lived(job: TrainingJob) -> TrainingJob:
    """Attempt 1 runs, checkpoints at step 100 and dies (OOM); attempt 2 waits out its backoff, runs, is suspended,
    and attempt 3 runs on."""
    job = job.model_copy(update={"metadata": job.metadata.model_copy(update={"creationTimestamp": at(-5)})})
    job, _ = step(job, [])
    job, _ = step(job, pods_of(job, 1, phase="Pending"), at(1))
    checkpoint = CheckpointStatus(step=100, path="/checkpoints/step-100", time=at(8))
    job, _ = step(job, pods_of(job, 1), at(10), checkpoint=checkpoint)
    oom = {"job-worker-1-1": {"phase": "Failed", "exit_code": 137, "reason": "OOMKilled"}}
    job, _ = step(job, pods_of(job, 1, oom), at(20))
    job, _ = step(job, pods_of(job, 2), at(40))
    job, _ = step(with_policy(job, suspend=True), pods_of(job, 2), at(50))
    job, _ = step(with_policy(job, suspend=False), [], at(80))
    job, _ = step(job, pods_of(job, 3), at(90))
    return job


def _spans(found: timeline.Timeline, row: str) -> list[tuple[str, Any, Any]]:
    return [(s.kind, s.start, s.end) for s in found.spans if s.row == row]


def test_attempts_backoffs_suspensions_failures_and_checkpoints_are_laid_out() -> None:
    job = _lived(make_job())
    found = timeline.build(job.to_manifest(), [], at(100))
    assert [r.id for r in found.rows] == ["job", "attempt-1", "attempt-2", "attempt-3"]
    assert (found.start, found.end) == (at(-5), at(100))
    assert _spans(found, "job") == [("pending", at(-5), T0), ("suspended", at(50), at(80))]
    assert _spans(found, "attempt-1") == [
        ("pending", T0, at(1)),
        ("starting", at(1), at(10)),
        ("running", at(10), at(20)),
    ]
    assert _spans(found, "attempt-2") == [("backoff", at(20), at(40)), ("running", at(40), at(50))]
    assert _spans(found, "attempt-3")[-1] == ("running", at(90), at(100))
    marks = {(m.row, m.kind, m.failure_class) for m in found.marks}
    assert ("attempt-1", "failure", "OOMKilled") in marks and ("attempt-1", "checkpoint", None) in marks
    last_of_first = [s.label for s in found.spans if s.row == "attempt-1"][-1]
    assert last_of_first == "running (Failed: OOMKilled)"
    assert found.rows[2].label == "attempt 2, from step 100"


def test_pods_get_rows_of_their_own() -> None:
    job = running()
    manifest = pod(job, Replica("worker", 0), 1, created=at(1))
    manifest["status"]["containerStatuses"] = [
        {"name": "trainer", "state": {"running": {"startedAt": at(4).isoformat()}}}
    ]
    manifest["metadata"]["deletionTimestamp"] = at(9).isoformat()
    times = timeline.pod_times(manifest)
    assert times is not None and (times.replica, times.attempt, times.started) == ("worker-0", 1, at(4))
    found = timeline.build(job.to_manifest(), [times], at(12))
    row = f"pod:{times.name}"
    assert _spans(found, row) == [("pending", at(1), at(4)), ("running", at(4), at(9)), ("terminating", at(9), at(12))]
    assert timeline.pod_times({"metadata": {"name": "other", "labels": {}}}) is None


def test_a_chrome_trace_names_every_row_and_holds_every_span_and_mark() -> None:
    job = _lived(make_job())
    job, _ = step(job, pods_of(job, 3), at(95), progress=Progress(step=5, metrics={"accuracy": 0.5}, metrics_step=5))
    found = timeline.build(job.to_manifest(), [], at(100))
    trace = json.loads(json.dumps(timeline.chrome_trace(found)))  # plain JSON
    events = trace["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert sorted(names.values()) == sorted(r.label for r in found.rows)
    complete = [e for e in events if e["ph"] == "X"]
    instant = [e for e in events if e["ph"] == "i"]
    assert len(complete) == len(found.spans) and len(instant) == len(found.marks)
    assert all(e["ts"] >= 0 and e["dur"] >= 0 and e["tid"] in names for e in complete)
    failure = next(e for e in instant if e["cat"] == "failure")
    assert failure["args"] == {"failureClass": "OOMKilled"} and failure["ts"] == 25_000_000  # 25 s after creation
    assert any(e["cat"] == "evaluation" and "accuracy 0.5" in e["name"] for e in instant)
    assert found.to_json()["marks"][0] == {
        "row": "job", "kind": "created", "time": at(-5).isoformat(), "label": "created", "failureClass": None,
    }  # fmt: skip


def test_an_attempt_suspended_in_its_backoff_and_resumed_gets_a_row_per_record() -> None:
    """Attempt 2 is suspended before it had pods: resuming keeps its number, so history holds two records of it."""
    job = running()
    job, _ = step(job, pods_of(job, 1, {"job-worker-0-1": {"phase": "Failed", "exit_code": 75}}), at(10))
    job, _ = step(with_policy(job, suspend=True), [], at(12))
    job, _ = step(with_policy(job, suspend=False), [], at(30))
    assert job.status and job.status.history
    assert [(r.attempt, r.outcome) for r in job.status.history.attempts][1:] == [(2, "Suspended"), (2, None)]
    found = timeline.build(job.to_manifest(), [], at(40))
    assert [r.id for r in found.rows] == ["job", "attempt-1", "attempt-2", "attempt-2-2"]
    assert found.rows[-1].label == "attempt 2 (resumed)"
    assert _spans(found, "attempt-2") == [("backoff", at(10), at(12))]
    assert _spans(found, "attempt-2-2") == [("pending", at(30), at(40))]
    tids = [e["tid"] for e in timeline.chrome_trace(found)["traceEvents"] if e["name"] == "thread_name"]
    assert len(tids) == len(set(tids)) == 4


def test_a_job_the_model_refuses_still_has_its_timeline() -> None:
    """Written before a CRD upgrade (an unknown spec field) with a status field a newer operator added."""
    manifest = _lived(make_job()).to_manifest()
    manifest["spec"]["retired"] = True
    manifest["status"]["fromTheFuture"] = {"x": 1}
    found = timeline.build(manifest, [], at(100))
    assert [r.id for r in found.rows] == ["job", "attempt-1", "attempt-2", "attempt-3"]
