"""The checkpoint folder layout: atomic `step-N` writes, completeness, newest-complete and keep-last-K."""

import hashlib
import io
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from trainer import faults

log = logging.getLogger(__name__)

STEP_PREFIX = "step-"
TEMP_PREFIX = ".tmp-"
STATE_FILE = "state.pt"
MARKER_FILE = "COMPLETE"


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
    if not root.is_dir():
        return []
    entries = []
    for child in root.iterdir():
        step = parse_step(child.name)
        if step is not None and child.is_dir():
            entries.append(CheckpointEntry(step, child, (child / MARKER_FILE).is_file()))
    return sorted(entries, key=lambda entry: entry.step)


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


def write_checkpoint(root: Path, step: int, state: dict[str, Any]) -> Path:
    """Write `step-N` atomically: temporary folder, fsync, completion marker, rename, fsync the parent."""
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"{STEP_PREFIX}{step}"
    buffer = io.BytesIO()
    torch.save(state, buffer)
    payload = buffer.getvalue()
    temp = root / f"{TEMP_PREFIX}{STEP_PREFIX}{step}-{uuid.uuid4().hex[:8]}"
    temp.mkdir()
    _write_synced(temp / STATE_FILE, payload)
    marker = {
        "step": step,
        "time": time.time(),
        "bytes": len(payload),
        "sha256": hashlib.sha256(payload).hexdigest(),
    }
    _write_synced(temp / MARKER_FILE, json.dumps(marker).encode())
    _fsync_dir(temp)
    faults.maybe_crash_before_rename(step)
    if final.exists():
        remove_checkpoint(final)
    os.rename(temp, final)
    _fsync_dir(root)
    return final


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
    for entry in newest_complete_first(list_checkpoints(root)):
        try:
            return entry, read_checkpoint(entry.path)
        except Exception as error:
            log.error("skipping corrupt checkpoint %s: %s: %s", entry.path, type(error).__name__, error)
    return None


def remove_checkpoint(path: Path) -> None:
    """Drop the marker first so that a folder removed halfway never looks complete."""
    (path / MARKER_FILE).unlink(missing_ok=True)
    shutil.rmtree(path, ignore_errors=True)


def prune(root: Path, keep: int) -> list[Path]:
    """Apply keep-last-K and clear temporary folders left by crashed writers; returns what was removed."""
    removed = [entry.path for entry in select_to_delete(list_checkpoints(root), keep)]
    for path in removed:
        remove_checkpoint(path)
    for child in root.iterdir() if root.is_dir() else ():
        if child.name.startswith(TEMP_PREFIX):
            shutil.rmtree(child, ignore_errors=True)
            removed.append(child)
    return removed
