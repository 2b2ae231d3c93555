"""The Checkpointer: interval policy, synchronous or background saves, resume from the newest complete one."""

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from trainer import checkpoint_request
from trainer import checkpoint_store as store
from trainer.checkpoint_pacing import CheckpointPacer
from trainer.env import CheckpointPolicy

log = logging.getLogger(__name__)


MAX_KEPT_REPORTED = 32  # the newest complete checkpoints named in a report (keep may be up to 1000)


@dataclass(frozen=True)
class SavedCheckpoint:
    """What progress reports about the last checkpoint: its step, folder and time, and the steps of the complete
    checkpoints on the volume once it was in and keep-last-K had pruned the older ones (newest first)."""

    step: int
    path: str
    time: float
    kept: tuple[int, ...] = ()


def kept_steps(root: Path) -> tuple[int, ...]:
    """The steps of the complete checkpoints under root, newest first (at most MAX_KEPT_REPORTED)."""
    return tuple(entry.step for entry in store.newest_complete_first(store.list_checkpoints(root)))[:MAX_KEPT_REPORTED]


def snapshot(value: Any) -> Any:
    """A deep copy of a state tree with every tensor copied to CPU, safe to write while training goes on."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, dict):
        return {key: snapshot(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(snapshot(item) for item in value)
    return value


class Checkpointer:
    """Owns when to save, how (atomically, maybe in the background) and what to resume from."""

    def __init__(
        self,
        policy: CheckpointPolicy,
        asynchronous: bool = False,
        clock: Callable[[], float] = time.monotonic,
        *,
        attempt: int | None = None,
    ) -> None:
        self.policy = policy
        self.asynchronous = asynchronous
        self.attempt = attempt  # the attempt this process trains for: its writes respect the fence
        self._clock = clock
        self._last_save_at = clock()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self.last: SavedCheckpoint | None = None
        self.started_step = -1  # the step of the newest save begun (a background one may still be writing)
        self.stall_seconds = 0.0  # time training was blocked by checkpoints, the wait for the last write included
        self.saves = 0
        pacing = policy.pacing if self.enabled else None
        self.pacer = CheckpointPacer(pacing, self._last_save_at) if pacing is not None else None

    @property
    def enabled(self) -> bool:
        """False when no checkpoint directory is configured."""
        return self.policy.directory is not None

    def is_step_due(self, step: int) -> bool:
        """The step-interval rule: deterministic, so every rank agrees without talking."""
        every = self.policy.every_steps
        return self.enabled and every is not None and step > 0 and step % every == 0

    @property
    def interval_seconds(self) -> float | None:
        """The seconds between time-based saves in force: Auto's paced interval, else the fixed everySeconds
        (None: no time-based saves)."""
        if self.pacer is not None and self.pacer.inputs.auto:
            return self.pacer.auto_seconds()
        return self.policy.every_seconds

    def is_time_due(self) -> bool:
        """The seconds-interval rule: DDP ranks must agree on it through rank 0."""
        every = self.interval_seconds
        return self.enabled and every is not None and self._clock() - self._last_save_at >= every

    def is_requested(self, step: int) -> bool:
        """A checkpoint newer than a step was asked for (trainer.checkpoint_request) and none of this attempt is:
        rank 0 reads it, and the ranks agree on it as on the time-based rule."""
        after = checkpoint_request.after_step(self.policy.request_file, self.attempt) if self.enabled else None
        newest = max(self.started_step, self.last.step if self.last is not None else -1)
        return after is not None and step > after and newest <= after

    def pacing_report(self) -> dict[str, Any] | None:
        """The progress report's "checkpointPacing" (None without TJ_CHECKPOINT_PACING)."""
        return self.pacer.report(self.interval_seconds) if self.pacer is not None else None

    def save(self, step: int, state: dict[str, Any]) -> None:
        """Save `state` as step-N; in the background if asynchronous (only one write in flight). The stall is
        measured on the checkpointer's clock, the one its intervals run on; Auto's next interval follows it."""
        if self.policy.directory is None:
            return
        started, self.started_step = self._clock(), step
        self._join()
        copy = snapshot(state) if self.asynchronous else state
        if self.asynchronous:
            self._thread = threading.Thread(target=self._write, args=(step, copy), name="checkpoint", daemon=True)
            self._thread.start()
        else:
            self._write(step, copy)
            self._raise_pending()
        self._last_save_at = self._clock()
        self.stall_seconds += self._last_save_at - started
        self.saves += 1
        if self.pacer is not None:
            self.pacer.measured(self._last_save_at, self.stall_seconds, self.saves)

    def raise_fence(self) -> None:
        """Rank 0 of an attempt after the first, before it trains: from now on older attempts cannot write here."""
        if self.policy.directory is not None and self.attempt is not None and self.attempt > 1:
            store.raise_fence(self.policy.directory, self.attempt)

    def _write(self, step: int, state: dict[str, Any]) -> None:
        assert self.policy.directory is not None
        try:
            path = store.write_checkpoint(self.policy.directory, step, {**state, "step": step}, self.attempt)
            if path is None:
                return  # fenced off: a later attempt owns the folder
            store.prune(self.policy.directory, self.policy.keep)
            self.last = SavedCheckpoint(step, str(path), time.time(), kept_steps(self.policy.directory))
            log.info("checkpoint saved: %s", path)
        except BaseException as error:
            self._error = error

    def _raise_pending(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise RuntimeError(f"checkpoint write failed: {error}") from error

    def wait(self) -> None:
        """Block until the write in flight is on disk (time training waits: counted as stall); re-raises its
        failure."""
        started = self._clock()
        self._join()
        self.stall_seconds += self._clock() - started

    def _join(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._raise_pending()

    def load_latest(self) -> dict[str, Any] | None:
        """The newest complete, loadable checkpoint's state, or None for a fresh start."""
        if self.policy.directory is None:
            return None
        found = store.load_newest(self.policy.directory)
        if found is None:
            log.info("no complete checkpoint under %s: starting from step 0", self.policy.directory)
            return None
        entry, state = found
        kept = kept_steps(self.policy.directory)
        self.last = SavedCheckpoint(entry.step, str(entry.path), entry.path.stat().st_mtime, kept)
        log.info("resuming from checkpoint %s (step %d)", entry.path, entry.step)
        return state


def checkpoint_root(policy: CheckpointPolicy, subfolder: str) -> CheckpointPolicy:
    """The same policy with its directory narrowed to a subfolder (one per parameter-server shard)."""
    if policy.directory is None:
        return policy
    return replace(policy, directory=Path(policy.directory) / subfolder)
