"""How tjctl shows jobs to a person: a table of them, and a job's percent done, time left, final metrics and where
its time went."""

from datetime import datetime
from typing import Any

from pydantic import ValidationError
from rich.console import Group
from rich.table import Table
from rich.text import Text

from trainingjob.children.goodput import PARTS
from trainingjob.model import Goodput, TrainingResult

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


def significant(value: float) -> str:
    """A value to three significant digits, so that a small one is not shown as zero: 1.23, 0.0123, 3.2e-05."""
    return f"{value:.3g}"


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


def goodput(found: Any) -> str:
    """status.goodput (or a timeline's totals) in one line: '0.275 | 40s: queued 2s, startup 3s, productive 11s,
    recovery 12s, redone 12s' (parts of no time left out); '' without one, or an unreadable one."""
    try:
        split = Goodput.model_validate(found) if isinstance(found, dict) else None
    except ValidationError:
        return ""
    if split is None:
        return ""
    seconds = {part.replace("_", " "): getattr(split, f"{part}_seconds") for part in PARTS}
    parts = ", ".join(f"{part} {duration(value)}" for part, value in seconds.items() if value)
    ratio = "unknown" if split.ratio is None else str(split.ratio)
    return f"{ratio} | {duration(split.wall_seconds)}" + (f": {parts}" if parts else "")


def goodput_of(job: Manifest) -> str:
    """The goodput line of a job as the cluster gives it, or ''."""
    return goodput((job.get("status") or {}).get("goodput"))


def pacing_of(job: Manifest) -> str:
    """How often the job checkpoints and why (status.progress.checkpointPacing's reason), or ''."""
    pacing = ((job.get("status") or {}).get("progress") or {}).get("checkpointPacing")
    return str(pacing.get("reason") or "") if isinstance(pacing, dict) else ""


def queued_of(job: Manifest) -> str:
    """Why Kueue holds the job (its Queued condition's message, while true), or ''."""
    conditions = (job.get("status") or {}).get("conditions") or []
    held = [c for c in conditions if isinstance(c, dict) and c.get("type") == "Queued" and c.get("status") == "True"]
    return str(held[0].get("message") or held[0].get("reason") or "") if held else ""


def age(created: Any, now: datetime) -> str:
    """How old something created at `created` (RFC 3339 text) is, as kubectl says it: 45s, 4m10s, 25m, 5h3m, 2d,
    3d4h, 400d, 2y3d; '<unknown>' without a time."""
    try:
        seconds = int((now - datetime.fromisoformat(str(created))).total_seconds())
    except (TypeError, ValueError):
        return "<unknown>"
    if seconds < -1:
        return "<invalid>"
    if seconds < 120:
        return f"{max(seconds, 0)}s"
    minutes, hours = seconds // 60, seconds // 3600
    days, years = hours // 24, hours // (24 * 365)
    steps = [
        (minutes < 10, minutes, "m", seconds % 60, "s"),
        (minutes < 180, minutes, "m", 0, ""),
        (hours < 8, hours, "h", minutes % 60, "m"),
        (hours < 48, hours, "h", 0, ""),
        (hours < 24 * 8, days, "d", hours % 24, "h"),
        (hours < 24 * 365 * 2, days, "d", 0, ""),
        (hours < 24 * 365 * 8, years, "y", days % 365, "d"),
    ]
    for applies, big, unit, small, small_unit in steps:
        if applies:
            return f"{big}{unit}{small}{small_unit}" if small else f"{big}{unit}"
    return f"{years}y"


def _restarts(status: Manifest) -> str:
    counts = status.get("restarts")
    return str(sum(v for v in counts.values() if isinstance(v, int))) if isinstance(counts, dict) else "0"


def _row(job: Manifest, now: datetime, wide: bool) -> list[str]:
    status, spec, meta = job.get("status") or {}, job.get("spec") or {}, job.get("metadata") or {}
    progress = status.get("progress") or {}
    done, loss = progress.get("percent"), progress.get("loss")
    row = [
        str(meta.get("name", "")),
        str(status.get("phase", "")),
        str(spec.get("mode", "DDP")),
        str((spec.get("workers") or {}).get("replicas", 1)),
        str(status.get("attempt", 0)),
        _restarts(status),
        str(progress.get("step", "")),
        f"{done}%" if isinstance(done, int) else "",
        time_left(progress.get("estimatedCompletionTime"), now),
        age(meta.get("creationTimestamp"), now),
    ]
    if wide:
        checkpoint = (status.get("lastCheckpoint") or {}).get("step")
        ratio = (status.get("goodput") or {}).get("ratio")
        row += [
            significant(loss) if isinstance(loss, int | float) else "",
            f"step-{checkpoint}" if checkpoint is not None else "",
            str((status.get("lastFailure") or {}).get("reason", "")),
            str(ratio) if isinstance(ratio, int | float) else "",
        ]
    return row


def table(jobs: list[Manifest], now: datetime, *, wide: bool = False, namespaces: bool = False) -> Table:
    """One row per job: where it stands, how far it got, how long it has left and how old it is; `wide` adds its
    loss, newest checkpoint, last failure's reason and goodput, `namespaces` a NAMESPACE column first (as kubectl
    -A)."""
    columns = ["NAME", "PHASE", "MODE", "WORKERS", "ATTEMPT", "RESTARTS", "STEP", "PROGRESS", "ETA", "AGE"]
    columns += ["LOSS", "CHECKPOINT", "FAILURE", "GOODPUT"] if wide else []
    rows = Table(*(["NAMESPACE"] if namespaces else []), *columns, box=None, pad_edge=False)
    for job in jobs:
        namespace = [str((job.get("metadata") or {}).get("namespace", ""))] if namespaces else []
        rows.add_row(*namespace, *_row(job, now, wide))
    return rows


def timeline(found: Manifest) -> Table | Group:
    """A job's timeline (the JSON of GET .../timeline) as a table: each row's spans and marks in time order, at
    their offset from the job's creation; under it the totals (the goodput split)."""
    start = datetime.fromisoformat(found["start"])
    labels = {row["id"]: row["label"] for row in found["rows"]}
    order = {row["id"]: number for number, row in enumerate(found["rows"])}
    lines = [(s["row"], s["start"], s["end"], s["label"]) for s in found["spans"]]
    lines += [(m["row"], m["time"], None, m["label"]) for m in found["marks"]]
    table = Table(box=None, pad_edge=False, title=f"{found['namespace']}/{found['name']}", title_justify="left")
    for column in ("ROW", "AT", "FOR", "WHAT"):
        table.add_column(column)
    for row, begin, end, label in sorted(lines, key=lambda line: (order.get(line[0], 0), line[1])):
        at = datetime.fromisoformat(begin)
        lasted = duration((datetime.fromisoformat(end) - at).total_seconds()) if end else ""
        table.add_row(labels.get(row, row), "+" + duration((at - start).total_seconds()), lasted, label)
    totals = goodput(found.get("totals"))
    return Group(table, Text(f"goodput: {totals}")) if totals else table
