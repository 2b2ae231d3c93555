"""The checkpoint folder layout: atomic `step-N` writes, completeness, newest-complete and keep-last-K, and the
attempt fence.

The fence (`.attempt`, an integer) names the newest attempt that has started training on this folder: rank 0 of
an attempt after the first raises it before it trains (written atomically, never lowered), and a write made for
an older attempt is refused, before it starts and again just before its rename commits it. A trainer of an attempt
the job has moved past (a process that outlived its attempt) can then neither add a checkpoint nor prune one.
"""

import hashlib
import io
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from trainer import faults

log = logging.getLogger(__name__)

STEP_PREFIX = "step-"
TEMP_PREFIX = ".tmp-"
ASIDE_PREFIX = ".replaced-"
STATE_FILE = "state.pt"
MARKER_FILE = "COMPLETE"
FENCE_FILE = ".attempt"


@dataclass(frozen=True)
class CheckpointEntry:
    """One `step-N` folder: complete only once its marker is there."""

    step: int
    path: Path
    complete: bool


def parse_step(name: str) -> int | None:
    """`step-N` -> N; anything else (temporary folders included) -> None."""
    if not name.startswith(STEP_PREFIX):
        return None
    digits = name[len(STEP_PREFIX) :]
    return int(digits) if digits.isdigit() else None


def parse_aside_step(name: str) -> int | None:
    """`.replaced-step-N-<id>` (a checkpoint being replaced by a re-save of its step) -> N; anything else -> None."""
    if not name.startswith(ASIDE_PREFIX):
        return None
    return parse_step(name[len(ASIDE_PREFIX) :].rpartition("-")[0])


def newest_complete_first(entries: Iterable[CheckpointEntry]) -> list[CheckpointEntry]:
    """The complete checkpoints, newest first; partial ones never appear."""
    return sorted((entry for entry in entries if entry.complete), key=lambda entry: entry.step, reverse=True)


def select_to_delete(entries: Iterable[CheckpointEntry], keep: int) -> list[CheckpointEntry]:
    """What keep-last-K removes: complete checkpoints older than the newest K, and partial ones below them."""
    entries = list(entries)
    kept = newest_complete_first(entries)[:keep]
    if len(kept) < keep:
        return []
    oldest_kept = kept[-1].step
    return sorted((entry for entry in entries if entry.step < oldest_kept), key=lambda entry: entry.step)


def list_checkpoints(root: Path) -> list[CheckpointEntry]:
    """Every `step-N` folder under root, complete or not."""
    return sorted(_folders(root, parse_step), key=lambda entry: entry.step)


def list_asides(root: Path) -> list[CheckpointEntry]:
    """Checkpoints a re-save of their step set aside and was killed before removing: resumes fall back on them."""
    return _folders(root, parse_aside_step)


def _folders(root: Path, parse: Callable[[str], int | None]) -> list[CheckpointEntry]:
    if not root.is_dir():
        return []
    entries = []
    for child in root.iterdir():
        step = parse(child.name)
        if step is not None and child.is_dir():
            entries.append(CheckpointEntry(step, child, (child / MARKER_FILE).is_file()))
    return entries


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_synced(path: Path, data: bytes) -> None:
    with path.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def read_fence(root: Path) -> int:
    """The newest attempt that started on this folder (0 without a fence, or with an unreadable one)."""
    try:
        text = (root / FENCE_FILE).read_text().strip()
    except OSError:
        return 0
    return int(text) if text.isdigit() else 0


def raise_fence(root: Path, attempt: int) -> int:
    """Record that `attempt` starts on this folder, unless the fence already names it or a later one (it is never
    lowered); written atomically. Returns the fence as it now stands."""
    fence = read_fence(root)
    if attempt <= fence:
        return fence
    root.mkdir(parents=True, exist_ok=True)
    temp = root / f"{FENCE_FILE}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        _write_synced(temp, str(attempt).encode())
        os.replace(temp, root / FENCE_FILE)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    _fsync_dir(root)
    return attempt


def is_fenced_off(root: Path, attempt: int | None, step: int) -> bool:
    """Whether a write for `attempt` must be refused: the fence names a later attempt (logged)."""
    fence = read_fence(root) if attempt is not None else 0
    if attempt is None or fence <= attempt:
        return False
    log.error("refusing to write step-%d: attempt %d is over, attempt %d owns the checkpoints", step, attempt, fence)
    return True


def write_checkpoint(root: Path, step: int, state: dict[str, Any], attempt: int | None = None) -> Path | None:
    """Write `step-N` atomically: temporary folder, fsync, completion marker, rename, fsync the parent.

    A failed write removes its temporary folder; a re-save of a step keeps the old `step-N` until the new one is in.
    A write for an `attempt` the fence has moved past writes nothing and returns None (checked again just before
    the rename).
    """
    if is_fenced_off(root, attempt, step):
        return None
    root.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    torch.save(state, buffer)
    remove_temporaries(root)
    temp = root / f"{TEMP_PREFIX}{STEP_PREFIX}{step}-{uuid.uuid4().hex[:8]}"
    try:
        _write_complete_folder(temp, step, buffer.getvalue())
        faults.maybe_delay_save()
        faults.maybe_crash_before_rename(step)
        if is_fenced_off(root, attempt, step):
            shutil.rmtree(temp, ignore_errors=True)
            return None
        return _rename_into_place(temp, root / f"{STEP_PREFIX}{step}")
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise


def _write_complete_folder(folder: Path, step: int, payload: bytes) -> None:
    """The state file, then the marker that vouches for it, both synced."""
    folder.mkdir()
    _write_synced(folder / STATE_FILE, payload)
    marker = {
        "step": step,
        "time": time.time(),
        "bytes": len(payload),
        "sha256": hashlib.sha256(payload).hexdigest(),
    }
    _write_synced(folder / MARKER_FILE, json.dumps(marker).encode())
    _fsync_dir(folder)


def _rename_into_place(temp: Path, final: Path) -> Path:
    """Rename `temp` to `final`; a complete `final` there is set aside first (resumes find it) and removed last."""
    aside = _set_aside(final)
    try:
        os.rename(temp, final)
    except BaseException:
        if aside is not None:
            os.rename(aside, final)
        raise
    _fsync_dir(final.parent)
    if aside is not None:
        remove_checkpoint(aside)
    return final


def _set_aside(final: Path) -> Path | None:
    """Move a complete `final` to a `.replaced-` name; an incomplete one holds nothing worth keeping."""
    if not final.exists():
        return None
    if not (final / MARKER_FILE).is_file():
        remove_checkpoint(final)
        return None
    aside = final.with_name(f"{ASIDE_PREFIX}{final.name}-{uuid.uuid4().hex[:8]}")
    os.rename(final, aside)
    return aside


def read_checkpoint(path: Path) -> dict[str, Any]:
    """Load one complete checkpoint, checking it against its marker; raises ValueError if it is corrupt."""
    marker = json.loads((path / MARKER_FILE).read_text())
    payload = (path / STATE_FILE).read_bytes()
    if len(payload) != marker["bytes"] or hashlib.sha256(payload).hexdigest() != marker["sha256"]:
        raise ValueError(f"{STATE_FILE} does not match its {MARKER_FILE} marker (truncated or modified)")
    state = torch.load(io.BytesIO(payload), map_location="cpu", weights_only=True)
    if not isinstance(state, dict) or state.get("step") != marker["step"]:
        raise ValueError("the state does not hold the step its marker names")
    return state


def load_newest(root: Path) -> tuple[CheckpointEntry, dict[str, Any]] | None:
    """The newest complete checkpoint that loads; corrupt ones are skipped with a log line, never fatal."""
    # Stable sort: a `step-N` comes before a set-aside copy of the same step.
    for entry in newest_complete_first([*list_checkpoints(root), *list_asides(root)]):
        try:
            return entry, read_checkpoint(entry.path)
        except Exception as error:
            log.error("skipping corrupt checkpoint %s: %s: %s", entry.path, type(error).__name__, error)
    return None


def remove_checkpoint(path: Path) -> None:
    """Drop the marker first so that a folder removed halfway never looks complete."""
    (path / MARKER_FILE).unlink(missing_ok=True)
    shutil.rmtree(path, ignore_errors=True)


def remove_temporaries(root: Path) -> list[Path]:
    """Remove the temporary folders of writes that failed or were killed (one writer per root: none is ours)."""
    removed = [child for child in root.iterdir() if child.name.startswith(TEMP_PREFIX)] if root.is_dir() else []
    for path in removed:
        shutil.rmtree(path, ignore_errors=True)
    return removed


def prune(root: Path, keep: int) -> list[Path]:
    """Apply keep-last-K and clear temporary and set-aside folders left by killed writers; returns what was removed."""
    entries = list_checkpoints(root)
    removed = [entry.path for entry in select_to_delete(entries, keep)]
    newest = max((entry.step for entry in entries if entry.complete), default=None)
    removed += [aside.path for aside in list_asides(root) if newest is not None and aside.step <= newest]
    for path in removed:
        remove_checkpoint(path)
    return removed + remove_temporaries(root)
