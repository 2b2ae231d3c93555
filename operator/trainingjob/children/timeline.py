"""Where a job's time went: build(job, pods, now) lays its history on a time axis (rows of spans and marks) and
chrome_trace() writes that as a Chrome trace (chrome://tracing, ui.perfetto.dev). Pure: the caller reads the job
and its pods. Rows: the job (created, suspensions, how it ended), one per attempt (backoff or pending, starting,
running until its first step, training, lost after its last heartbeat when it failed; failures by class,
node refusals, checkpoints, evaluations) and one per pod still there (pending, running, terminating). The attempts'
times are those the goodput split counts (children/goodput.py), and the timeline carries that split as its
totals."""

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from trainingjob.children.goodput import AttemptTimes, all_attempt_times, axis, creation_time, goodput, had_pods
from trainingjob.children.naming import CONTAINER_NAME
from trainingjob.children.observe import pod_state
from trainingjob.model import (
    AttemptOutcome,
    AttemptRecord,
    EarlierAttempts,
    Goodput,
    History,
    Phase,
    RefusalRecord,
    TrainingJobStatus,
)
from trainingjob.plan.invalid import salvaged_status

JOB_ROW = "job"


@dataclass(frozen=True)
class PodTimes:
    """What the timeline needs of a pod."""

    name: str
    replica: str  # worker-0, ps-1
    attempt: int
    created: datetime
    started: datetime | None = None  # its trainer container started
    finished: datetime | None = None  # its trainer container ended
    deleting: datetime | None = None  # deletionTimestamp: it is terminating
    phase: str = "Pending"


def pod_times(pod: dict[str, Any]) -> PodTimes | None:
    """A pod manifest's times, read by the operator's own pod_state (None for a pod that is not one of a job's):
    when it was created, when its trainer container started and ended, since when it is terminating."""
    state = pod_state(pod, CONTAINER_NAME)
    if state is None or state.created is None:
        return None
    return PodTimes(
        name=state.name,
        replica=f"{state.replica.role}-{state.replica.index}",
        attempt=state.attempt,
        created=state.created,
        started=state.started_at,
        finished=state.finished_at,
        deleting=state.deleting_since,
        phase=state.phase.value,
    )


@dataclass(frozen=True)
class Row:
    id: str
    label: str


@dataclass(frozen=True)
class Span:
    row: str
    kind: str  # backoff, starting, running, suspended, pending, terminating
    start: datetime
    end: datetime
    label: str


@dataclass(frozen=True)
class Mark:
    row: str
    kind: str  # created, failure, refused, checkpoint, evaluation, succeeded, failed
    time: datetime
    label: str
    failure_class: str | None = None


@dataclass(frozen=True)
class Timeline:
    namespace: str
    name: str
    start: datetime
    end: datetime
    rows: list[Row] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    totals: Goodput | None = None  # the goodput split of the same axis

    def to_json(self) -> dict[str, Any]:
        """camelCase JSON, times as ISO 8601."""
        totals = self.totals.model_dump(mode="json", by_alias=True, exclude_none=True) if self.totals else None
        return {
            "namespace": self.namespace,
            "name": self.name,
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "totals": totals,
            "rows": [asdict(r) for r in self.rows],
            "spans": [_iso(asdict(s)) for s in self.spans],
            "marks": [
                {
                    "row": m.row,
                    "kind": m.kind,
                    "time": m.time.isoformat(),
                    "label": m.label,
                    "failureClass": m.failure_class,
                }
                for m in self.marks
            ],
        }


def _iso(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in values.items()}


def build(job: Mapping[str, Any], pods: Iterable[PodTimes], now: datetime) -> Timeline:
    """The timeline of a job manifest as stored: only its metadata and the still-valid part of its status are read,
    so a job the model refuses (written before a CRD upgrade, or by a newer operator) has one too."""
    meta = job.get("metadata") or {}
    status = salvaged_status(job.get("status"))
    history = status.history or History()
    created = creation_time(meta)
    start, end = axis(created, status, now)
    totals = goodput(status, created, now)
    timeline = Timeline(str(meta.get("namespace") or ""), str(meta.get("name") or ""), start, end, totals=totals)
    timeline.rows.append(Row(JOB_ROW, "job"))
    timeline.marks.append(Mark(JOB_ROW, "created", start, "created"))
    attempts, rows, times = history.attempts, attempt_rows(history.attempts), all_attempt_times(history, start, end)
    _job_row(timeline, status, history, times)
    failed_before = history.earlier is not None and history.earlier.suspended_since is None  # as far as we know
    for number, (record, row) in enumerate(zip(attempts, rows, strict=True)):
        after_failure = attempts[number - 1].outcome == AttemptOutcome.FAILED if number > 0 else failed_before
        _attempt_row(timeline, row, record, times[number], after_failure)
    _marks(timeline, history, rows)
    for pod in sorted(pods, key=lambda p: (-p.attempt, p.replica)):
        _pod_row(timeline, pod, end)
    return timeline


def _job_row(timeline: Timeline, status: TrainingJobStatus, history: History, times: list[AttemptTimes]) -> None:
    attempts = history.attempts
    _before_attempts(timeline, history.earlier, times[0].start if times else timeline.end)
    for number, record in enumerate(attempts):
        if record.outcome != AttemptOutcome.SUSPENDED or record.end_time is None:
            continue
        resumed = times[number + 1].start if number + 1 < len(times) else timeline.end
        if resumed > times[number].end:
            timeline.spans.append(Span(JOB_ROW, "suspended", times[number].end, resumed, "suspended"))
    ended = attempts[-1].outcome not in (None, AttemptOutcome.SUSPENDED) if attempts else False
    if ended and timeline.end > times[-1].end:  # no next attempt yet (or its completion was recorded late)
        kind = "backoff" if any(had_pods(record) for record in attempts) else "pending"
        timeline.spans.append(Span(JOB_ROW, kind, times[-1].end, timeline.end, "waiting for the next attempt"))
    if status.phase.is_terminal and status.completion_time is not None:
        kind = "succeeded" if status.phase == Phase.SUCCEEDED else "failed"
        timeline.marks.append(Mark(JOB_ROW, kind, status.completion_time, status.phase.value))


def _before_attempts(timeline: Timeline, earlier: EarlierAttempts | None, started: datetime) -> None:
    """Until the first attempt in the list: waiting to start; or the attempts dropped from it (their totals kept),
    then what followed the last of them (waiting, or suspended)."""
    began, waiting, label = timeline.start, "pending", "waiting to start"
    if earlier is not None:
        began = min(max(earlier.until, timeline.start), timeline.end)
        what = f"{earlier.attempts} earlier attempts (only their totals are kept)"
        if began > timeline.start:
            timeline.spans.append(Span(JOB_ROW, "earlier", timeline.start, began, what))
        if earlier.had_pods:
            waiting, label = "backoff", "waiting for the next attempt"
    since = earlier.suspended_since if earlier is not None else None
    paused = min(max(since, began), started) if since is not None else started
    if paused > began:
        timeline.spans.append(Span(JOB_ROW, waiting, began, paused, label))
    if started > paused:
        timeline.spans.append(Span(JOB_ROW, "suspended", paused, started, "suspended"))


def attempt_rows(attempts: list[AttemptRecord]) -> list[str]:
    """Each record's row: attempt-N, and attempt-N-2, -3 ... for an attempt resumed under the same number (one
    suspended before it had pods)."""
    seen: dict[int, int] = {}
    rows = []
    for record in attempts:
        seen[record.attempt] = seen.get(record.attempt, 0) + 1
        count = seen[record.attempt]
        rows.append(f"attempt-{record.attempt}" + (f"-{count}" if count > 1 else ""))
    return rows


def _attempt_row(timeline: Timeline, row: str, record: AttemptRecord, times: AttemptTimes, after_failure: bool) -> None:
    """Waiting (a backoff after a failure), starting (pods created, not all running), running (until its first
    step), training (until its last step), lost (a failed one's time after its last heartbeat); how it ended."""
    resumed = f", from step {record.resumed_from_step}" if record.resumed_from_step else ""
    again = " (resumed)" if row.count("-") > 1 else ""
    timeline.rows.append(Row(row, f"attempt {record.attempt}{again}{resumed}"))
    stop, trained = times.end, times.trained_until
    ended = f" ({record.outcome.value}{': ' + record.reason if record.reason else ''})" if record.outcome else ""
    first = times.first_step or stop
    ran = min(max(record.running_time, times.pods or times.start), first) if record.running_time else None
    phases = [
        ("backoff" if after_failure else "pending", times.start, times.pods or ran or first),
        ("starting", times.pods, ran or first),
        ("running", ran, first),
        ("training", times.first_step, trained),
        ("lost", trained, stop),
    ]
    spans = [(kind, start, finish) for kind, start, finish in phases if start and finish and finish > start]
    for number, (kind, start, finish) in enumerate(spans):
        label = kind + (ended if number == len(spans) - 1 else "")
        timeline.spans.append(Span(row, kind, start, finish, label))


def _marks(timeline: Timeline, history: History, rows: list[str]) -> None:
    for failure in history.failures:
        row = _attempt_at(history.attempts, rows, failure.time, failure.attempt)
        exit_code = f" exit {failure.exit_code}" if failure.exit_code is not None else ""
        label = f"{failure.pod}: {failure.failure_class.value}{exit_code} {failure.reason}".strip()
        label += f"; then {failure.consequences}" if failure.consequences else ""
        timeline.marks.append(Mark(row, "failure", failure.time, label, failure.failure_class.value))
    for refusal in history.refusals:
        row = _attempt_at(history.attempts, rows, refusal.since, refusal.attempt)
        timeline.marks.append(Mark(row, "refused", refusal.since, refusal_label(refusal)))
    for checkpoint in history.checkpoints:
        row = _attempt_at(history.attempts, rows, checkpoint.time)
        timeline.marks.append(Mark(row, "checkpoint", checkpoint.time, f"checkpoint at step {checkpoint.step}"))
    for evaluation in history.evaluations:
        values = ", ".join(f"{k} {v:.4g}" for k, v in sorted(evaluation.metrics.items()))
        row = _attempt_at(history.attempts, rows, evaluation.time)
        timeline.marks.append(Mark(row, "evaluation", evaluation.time, f"step {evaluation.step}: {values}"))


def refusal_label(refusal: RefusalRecord) -> str:
    """'job-worker-1-1 refused by node n3: OutOfnvidia.com/gpu, 4 times since 10:02:07 UTC'."""
    times = "once" if refusal.count == 1 else f"{refusal.count} times"
    node = f" by node {refusal.node}" if refusal.node else ""
    reason = f": {refusal.reason}" if refusal.reason else ""
    since = refusal.since.astimezone(UTC).strftime("%H:%M:%S UTC")
    return f"{refusal.pod} refused{node}{reason}, {times} since {since} (created again alone, no failure counted)"


def _attempt_at(attempts: list[AttemptRecord], rows: list[str], time: datetime, number: int | None = None) -> str:
    """The row of the attempt (numbered `number`, when given) that ran at `time`; else the last record with that
    number; else the job's row."""
    candidates = [(r, row) for r, row in zip(attempts, rows, strict=True) if number is None or r.attempt == number]
    for record, row in reversed(candidates):
        if record.start_time <= time and (record.end_time is None or time <= record.end_time):
            return row
    return candidates[-1][1] if candidates and number is not None else JOB_ROW


def _pod_row(timeline: Timeline, pod: PodTimes, end: datetime) -> None:
    row = f"pod:{pod.name}"
    timeline.rows.append(Row(row, f"{pod.replica} (attempt {pod.attempt})"))
    stop = min(t for t in (pod.finished, pod.deleting, end) if t is not None)
    pending_end = pod.started or stop
    if pending_end > pod.created:
        timeline.spans.append(Span(row, "pending", pod.created, pending_end, "pending"))
    if pod.started is not None and stop > pod.started:
        timeline.spans.append(Span(row, "running", pod.started, stop, f"running ({pod.phase})"))
    if pod.deleting is not None and end > pod.deleting:
        timeline.spans.append(Span(row, "terminating", pod.deleting, end, "terminating"))


def chrome_trace(timeline: Timeline) -> dict[str, Any]:
    """The Trace Event Format: one process (the job), one thread per row, spans as complete events ("X") and
    marks as instant events ("i"); times in microseconds since the job was created."""

    def micros(time: datetime) -> int:
        return int((time - timeline.start).total_seconds() * 1_000_000)

    threads = {row.id: number + 1 for number, row in enumerate(timeline.rows)}
    events: list[dict[str, Any]] = [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": f"{timeline.namespace}/{timeline.name}"}}
    ]
    for row in timeline.rows:
        tid = threads[row.id]
        events.append({"ph": "M", "pid": 1, "tid": tid, "name": "thread_name", "args": {"name": row.label}})
        events.append({"ph": "M", "pid": 1, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": tid}})
    for span in timeline.spans:
        duration = max(micros(span.end) - micros(span.start), 0)
        events.append(
            {"ph": "X", "pid": 1, "tid": threads[span.row], "name": span.label, "cat": span.kind,
             "ts": micros(span.start), "dur": duration}
        )  # fmt: skip
    for mark in timeline.marks:
        args = {"failureClass": mark.failure_class} if mark.failure_class else {}
        events.append(
            {"ph": "i", "s": "t", "pid": 1, "tid": threads[mark.row], "name": mark.label, "cat": mark.kind,
             "ts": micros(mark.time), "args": args}
        )  # fmt: skip
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {"job": f"{timeline.namespace}/{timeline.name}"},
    }
