"""The timeline: a job's history and its pods on a time axis, and the same as a Chrome trace; its spans add up to
the goodput split it carries as its totals."""

import json
from datetime import datetime
from typing import Any

import pytest
from hypothesis import given, settings
from tests.support.builders import T0, at, make_job, pod, pods_of, running, step, with_policy
from tests.support.histories import WORKED_EXAMPLE, attempt_record, histories, many_attempts, status_of

from trainingjob.children import goodput, timeline
from trainingjob.children.naming import Replica
from trainingjob.model import AttemptOutcome, CheckpointStatus, History, Progress, TrainingJob, TrainingJobStatus

pytestmark = pytest.mark.fast


def _lived(job: TrainingJob) -> TrainingJob:
    """Attempt 1 runs, checkpoints at step 100 and dies (OOM); attempt 2 waits out its backoff, runs, is suspended,
    and attempt 3 runs on."""
    job = job.model_copy(
        update={"metadata": job.metadata.model_copy(update={"creation_timestamp": at(-5).isoformat()})}
    )
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


def _manifest(status: TrainingJobStatus, created: datetime) -> dict[str, Any]:
    meta = {"name": "job", "namespace": "ns", "creationTimestamp": created.isoformat()}
    return {"metadata": meta, "status": status.model_dump(mode="json", by_alias=True, exclude_none=True)}


def _summed(found: timeline.Timeline, status: TrainingJobStatus) -> dict[str, float]:
    """The timeline's spans summed by what the goodput split calls them: waiting before the first attempt with pods
    is queueing, that attempt's start is startup, every later wait and start (a backoff on the job's row too) and
    every failed attempt's time after its last heartbeat is recovery."""
    attempts = status.history.attempts if status.history else []
    had_pods = [r.pods_time is not None or r.first_step_time is not None or r.in_place for r in attempts]
    first = next((n for n, had in enumerate(had_pods) if had), len(attempts))
    if status.history and status.history.earlier and status.history.earlier.had_pods:
        first = -1  # every wait in the list is recovery
    rows = timeline.attempt_rows(attempts)
    sums = dict.fromkeys(("queued", "startup", "training", "recovery", "suspended"), 0.0)
    for span in found.spans:
        seconds = (span.end - span.start).total_seconds()
        if span.row == timeline.JOB_ROW and span.kind == "earlier":  # their totals, as kept
            earlier = status.history.earlier if status.history else None
            assert earlier is not None
            for part in ("queued", "startup", "recovery", "suspended"):
                sums[part] += getattr(earlier, f"{part}_seconds")
            sums["training"] += sum(
                getattr(earlier, f"{part}_seconds") for part in ("productive", "checkpoint_stall", "redone", "shrunk")
            )
        elif span.row == timeline.JOB_ROW:
            sums[{"suspended": "suspended", "backoff": "recovery"}.get(span.kind, "queued")] += seconds
            continue
        if span.row == timeline.JOB_ROW:
            continue
        number = rows.index(span.row)
        if span.kind == "training":
            sums["training"] += seconds
        elif span.kind in ("pending", "backoff") and number <= first:
            sums["queued"] += seconds
        elif span.kind in ("starting", "running") and number == first:
            sums["startup"] += seconds
        else:
            sums["recovery"] += seconds
    return sums


def _agree(status: TrainingJobStatus, created: datetime, now: datetime) -> None:
    found = timeline.build(_manifest(status, created), [], now)
    split = goodput.split(status, created, now)
    training = split.productive + split.checkpoint_stall + split.redone + split.shrunk
    expected = {"queued": split.queued, "startup": split.startup, "training": training, "recovery": split.recovery,
                "suspended": split.suspended}  # fmt: skip
    assert _summed(found, status) == pytest.approx(expected, abs=1e-6)
    assert (found.start, found.end) == goodput.axis(created, status, now)
    assert found.totals == goodput.goodput(status, created, now)
    assert found.to_json()["totals"]["wallSeconds"] == round(split.wall)


@pytest.mark.parametrize("now", [40, 45], ids=["as-of-the-example", "later"])
def test_the_timelines_totals_agree_with_the_goodput_split(now: float) -> None:
    """The worked example: attempts that failed, restarted, trained, redid steps, and one still training."""
    _agree(WORKED_EXAMPLE, T0, at(now))


def test_an_attempt_trains_from_its_first_step_and_a_failed_one_loses_what_follows_its_last_heartbeat() -> None:
    status = status_of(
        attempt_record(1, 0, 20, pods=1, running_time=at(3), first=6, heartbeat=15, last_step=9),
        attempt_record(2, 20, 30, AttemptOutcome.SUSPENDED, pods=24, first=26, resumed_from_step=5, last_step=12),
        attempt_record(3, 50, pods=52, first=53, resumed_from_step=12, last_step=14),
    )
    found = timeline.build(_manifest(status, T0), [], at(60))
    assert _spans(found, "attempt-1") == [
        ("pending", T0, at(1)), ("starting", at(1), at(3)), ("running", at(3), at(6)), ("training", at(6), at(15)),
        ("lost", at(15), at(20)),
    ]  # fmt: skip
    assert _spans(found, "attempt-2") == [("backoff", at(20), at(24)), ("starting", at(24), at(26)),
                                          ("training", at(26), at(30))]  # fmt: skip
    assert _spans(found, "job") == [("suspended", at(30), at(50))]
    _agree(status, T0, at(60))


def test_a_lived_jobs_timeline_agrees_with_its_goodput() -> None:
    job = _lived(make_job())
    assert job.status is not None
    _agree(job.status, at(-5), at(100))


@pytest.mark.parametrize("dropped", [6, 7], ids=["after-a-failure", "after-a-suspension"])
def test_a_timeline_whose_first_attempts_were_dropped_agrees_with_its_goodput(dropped: int) -> None:
    """32 attempts kept of 40, the first ones folded into status.history.earlier: one span for them on the job's row
    (their totals as kept), then what followed the last of them."""
    records = many_attempts(32 + dropped)
    earlier = goodput.earlier_attempts(History.model_construct(attempts=records), dropped, at(-5), at(300))
    status = status_of().model_copy(update={"history": History(attempts=records[dropped:], earlier=earlier)})
    found = timeline.build(_manifest(status, at(-5)), [], at(500))
    if dropped == 7:  # the 7th (60 s to 70 s) was suspended: the job waits 30 s for the 8th
        assert _spans(found, "job")[:2] == [("earlier", at(-5), at(70)), ("suspended", at(70), at(100))]
    else:  # the 6th failed 2 s after its last heartbeat: what follows it is the 7th's (50 s to 60 s) recovery
        assert _spans(found, "job")[:2] == [("earlier", at(-5), at(58)), ("backoff", at(58), at(60))]
        assert _spans(found, "attempt-7")[0] == ("backoff", at(60), at(61))
    _agree(status, at(-5), at(500))


@settings(deadline=None, max_examples=200)
@given(histories())
def test_any_timeline_agrees_with_its_goodput_split(history: tuple[TrainingJobStatus, datetime, datetime]) -> None:
    _agree(*history)
