"""Rank 0's metrics history beside the checkpoints: metrics.jsonl, and TensorBoard event files when tensorboard is
installed.

One JSON object per line: {"step": 120, "kind": "train" | "eval", "attempt": 1, "time": <unix seconds>, <name>: value,
...}. A resumed run first drops the lines past the step it resumed from, so the file reads as one run.
A failing write (a full disk) is logged once and turns the history off; training goes on.
"""

import json
import logging
import math
import time
from pathlib import Path
from typing import Any

from trainer.progress_endpoint import write_text_atomically

log = logging.getLogger(__name__)

FILE_NAME = "metrics.jsonl"
TENSORBOARD_FOLDER = "tensorboard"
TRAIN_RECORDS = 1000  # about how many training-loss lines a whole run writes


def train_record_interval(total_steps: int) -> int:
    """Record the training loss every this many steps."""
    return max(1, total_steps // TRAIN_RECORDS)


def _kept_lines(text: str, resumed_from: int) -> list[str]:
    kept = []
    for line in text.splitlines():
        try:
            step = json.loads(line).get("step")
        except (json.JSONDecodeError, AttributeError):
            continue  # a line cut short by a kill
        if isinstance(step, int) and step <= resumed_from:
            kept.append(line)
    return kept


class MetricsHistory:
    """Appends records to <directory>/metrics.jsonl (and TensorBoard); does nothing without a directory."""

    def __init__(self, directory: Path | None, attempt: int, resumed_from: int) -> None:
        self.path = directory / FILE_NAME if directory is not None else None
        self.attempt = attempt
        self.writer: Any = None
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.exists():
                kept = _kept_lines(self.path.read_text(errors="replace"), resumed_from)
                write_text_atomically(self.path, "".join(f"{line}\n" for line in kept))
        except OSError as error:
            self._give_up(error)
            return
        self.writer = _tensorboard(self.path.parent / TENSORBOARD_FOLDER, resumed_from)

    def record(self, step: int, kind: str, values: dict[str, float]) -> None:
        """One line: the step, what was measured (train or eval) and the values (non-finite ones as null)."""
        if self.path is None:
            return
        clean = {name: value if math.isfinite(value) else None for name, value in values.items()}
        line = {**clean, "step": step, "kind": kind, "attempt": self.attempt, "time": round(time.time(), 3)}
        try:
            with self.path.open("a") as handle:
                handle.write(json.dumps(line, sort_keys=True) + "\n")
        except OSError as error:
            self._give_up(error)
        if self.writer is not None:
            for name, value in values.items():
                self.writer.add_scalar(f"{kind}/{name}", value, step)

    def _give_up(self, error: OSError) -> None:
        log.warning("metrics history off: cannot write %s: %s", self.path, error)
        self.path = None

    def close(self) -> None:
        """Flush the TensorBoard events."""
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def _tensorboard(folder: Path, resumed_from: int) -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter  # noqa: PLC0415
    except ImportError:
        return None  # the tensorboard package is not installed
    return SummaryWriter(str(folder), purge_step=resumed_from + 1 if resumed_from else None)
