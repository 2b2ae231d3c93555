"""A checkpoint on request: the operator asks rank 0's agent for a checkpoint newer than a step (an elastic job that
found room grows back at its next checkpoint, and asks for it rather than wait for the interval), the agent writes
the request to TJ_CHECKPOINT_REQUEST_FILE (a file of its own, which its trainers are told of), and rank 0's trainer
reads it at the ranks' next agreement: due while no checkpoint of this attempt is newer than the step asked for.

The file is {"attempt": A, "afterStep": S}, replaced atomically; a request of another attempt, or a file that cannot
be read, asks nothing."""

import json
import os
from pathlib import Path

MAX_BYTES = 256


def write(path: Path, attempt: int, after_step: int) -> None:
    """Ask `attempt`'s rank 0 for a checkpoint newer than `after_step` (the agent; atomic: the trainer never reads a
    half-written request)."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps({"attempt": attempt, "afterStep": after_step}))
    os.replace(partial, path)


def after_step(path: Path | None, attempt: int | None) -> int | None:
    """The step a checkpoint was asked to be newer than, for this attempt; None when none was asked."""
    if path is None:
        return None
    try:
        with path.open("rb") as file:
            data = json.loads(file.read(MAX_BYTES))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("attempt") != attempt:
        return None
    step = data.get("afterStep")
    return step if isinstance(step, int) and not isinstance(step, bool) and step >= 0 else None
