"""How tjctl shows jobs to a person: a table of them, and a job's percent done, time left and final metrics."""

from datetime import datetime
from typing import Any

from pydantic import ValidationError
from rich.table import Table

from trainingjob.model import TrainingResult

Manifest = dict[str, Any]


def time_left(estimate: Any, now: datetime) -> str:
    """'42s', '4m10s', '3h05m' or '2d03h' until `estimate` (or its RFC 3339 text, as the API gives it); '0s' once
    it has passed, '' without one."""
    if isinstance(estimate, str):
        try:
            estimate = datetime.fromisoformat(estimate)
        except ValueError:
            return ""
    if not isinstance(estimate, datetime) or estimate.tzinfo is None:
        return ""
    return duration((estimate - now).total_seconds())


def duration(seconds: float) -> str:
    """'42s', '4m10s', '3h05m' or '2d03h'; '0s' for none or less."""
    seconds = max(int(seconds), 0)
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if seconds < 60:
        return f"{seconds}s"
    if hours < 1:
        return f"{minutes}m{seconds % 60:02}s"
    if days < 1:
        return f"{hours}h{minutes % 60:02}m"
    return f"{days}d{hours % 24:02}h"


def metrics(values: dict[str, float]) -> str:
    """'accuracy 0.9700, loss 0.1100'."""
    return ", ".join(f"{name} {value:.4f}" for name, value in sorted(values.items()))


def result(outcome: TrainingResult) -> str:
    """A Succeeded job's result in one line: 'accuracy 0.9700 (step 1000) | 1000 steps in 52 s | /c/step-1000'."""
    parts = []
    if outcome.metrics:
        at = f" (step {outcome.metrics_step})" if outcome.metrics_step is not None else ""
        parts.append(metrics(outcome.metrics) + at)
    steps = f"{outcome.step} steps" if outcome.step is not None else ""
    took = f"{outcome.duration_seconds} s" if outcome.duration_seconds is not None else ""
    parts.append(" in ".join(part for part in (steps, took) if part))
    if outcome.checkpoint is not None:
        parts.append(f"checkpoint {outcome.checkpoint.path}")
    return " | ".join(part for part in parts if part)


def result_of(job: Manifest) -> str:
    """The result line of a job as the cluster gives it, or '' when it has none (or an unreadable one)."""
    found = (job.get("status") or {}).get("result")
    try:
        return result(TrainingResult.model_validate(found)) if found else ""
    except ValidationError:
        return ""


def table(jobs: list[Manifest], now: datetime) -> Table:
    """One row per job: where it stands, how far it got and how long it has left."""
    rows = Table("NAME", "PHASE", "MODE", "WORKERS", "ATTEMPT", "RESTARTS", "STEP", "PROGRESS", "ETA", box=None)
    for job in jobs:
        status, spec = job.get("status") or {}, job["spec"]
        progress = status.get("progress") or {}
        done = progress.get("percent")
        rows.add_row(
            job["metadata"]["name"],
            status.get("phase", ""),
            spec.get("mode", "DDP"),
            str(spec["workers"].get("replicas", 1)),
            str(status.get("attempt", 0)),
            str(sum((status.get("restarts") or {}).values())),
            str(progress.get("step", "")),
            f"{done}%" if isinstance(done, int) else "",
            time_left(progress.get("estimatedCompletionTime"), now),
        )
    return rows


def timeline(found: Manifest) -> Table:
    """A job's timeline (the JSON of GET .../timeline) as a table: each row's spans and marks in time order, at
    their offset from the job's creation."""
    start = datetime.fromisoformat(found["start"])
    labels = {row["id"]: row["label"] for row in found["rows"]}
    order = {row["id"]: number for number, row in enumerate(found["rows"])}
    lines = [(s["row"], s["start"], s["end"], s["label"]) for s in found["spans"]]
    lines += [(m["row"], m["time"], None, m["label"]) for m in found["marks"]]
    table = Table(box=None, title=f"{found['namespace']}/{found['name']}", title_justify="left")
    for column in ("ROW", "AT", "FOR", "WHAT"):
        table.add_column(column)
    for row, begin, end, label in sorted(lines, key=lambda line: (order.get(line[0], 0), line[1])):
        at = datetime.fromisoformat(begin)
        lasted = duration((datetime.fromisoformat(end) - at).total_seconds()) if end else ""
        table.add_row(labels.get(row, row), "+" + duration((at - start).total_seconds()), lasted, label)
    return table
