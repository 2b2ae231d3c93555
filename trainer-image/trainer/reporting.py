"""What rank 0 tells the world as it trains: the progress endpoint and file, the metrics history and its log.
On every other rank a RunReport does nothing, so the training loops call it unconditionally."""

import logging
from typing import Any

from trainer.checkpoint import Checkpointer
from trainer.checkpoint_cleanup import clear_checkpoints
from trainer.env import TrainerEnv
from trainer.metrics_log import MetricsHistory, train_record_interval
from trainer.progress_endpoint import ProgressReporter

log = logging.getLogger(__name__)


def checkpoint_pacing(checkpointer: Checkpointer) -> dict[str, Any]:
    """{"checkpointPacing": ...} for the progress report, or nothing without TJ_CHECKPOINT_PACING."""
    pacing = checkpointer.pacing_report()
    return {"checkpointPacing": pacing} if pacing is not None else {}


def describe(metrics: dict[str, float]) -> str:
    """'accuracy 0.9721, loss 0.1042' (the log line tests and people read)."""
    return ", ".join(f"{name} {value:.4f}" for name, value in metrics.items()) or "no metrics"


class RunReport:
    """Rank 0's progress reporter and metrics history (both absent elsewhere)."""

    def __init__(self, env: TrainerEnv, is_reporter: bool) -> None:
        self.env = env
        self.progress = ProgressReporter(env.attempt, env.progress_port, env.progress_file) if is_reporter else None
        self.history: MetricsHistory | None = None
        self.interval = 1
        self.total = 0

    @property
    def is_reporter(self) -> bool:
        """True on rank 0 (DDP) or worker 0 (parameter-server mode)."""
        return self.progress is not None

    def start(self, resumed_from: int, total: int, **fields: Any) -> None:
        """Open the endpoint and the history, once the run knows where it starts and ends."""
        if self.progress is None:
            return
        self.total, self.interval = total, train_record_interval(total)
        self.history = MetricsHistory(self.env.checkpoint.directory, self.env.attempt, resumed_from)
        cleared = clear_checkpoints(self.env)  # a sweep's trial: the finished trials' folders it was told to remove
        self.progress.start().update(
            resumedFromStep=resumed_from, totalSteps=total, step=resumed_from, **cleared, **fields
        )

    def stepped(self, step: int, loss: float, samples: int) -> None:
        """A finished step: progress at once, the history every `interval` steps and at the last."""
        if self.progress is None:
            return
        self.progress.report(step, loss, samples)
        if self.history is not None and (step % self.interval == 0 or step == self.total):
            self.history.record(step, "train", {"loss": loss})

    def evaluated(self, step: int, metrics: dict[str, float]) -> None:
        """An evaluation's metrics: logged, in the history and in the progress (accuracy also at the top level)."""
        if self.progress is None:
            return
        log.info("evaluation at step %d: %s", step, describe(metrics))
        if self.history is not None:
            self.history.record(step, "eval", metrics)
        top_level = {"accuracy": metrics["accuracy"]} if "accuracy" in metrics else {}
        self.progress.update(metrics=metrics, metricsStep=step, **top_level)

    def checkpointed(self, checkpointer: Checkpointer) -> None:
        """The last complete checkpoint, if any (the one this attempt resumed from until it saves one: the newest
        complete one on the volume), and how long the saves have stalled training (checkpointStallSeconds:
        the operator counts it out of this attempt's productive time); with TJ_CHECKPOINT_PACING, the interval the
        saves so far made Auto pick (checkpointPacing)."""
        if self.progress is None:
            return
        pacing = checkpoint_pacing(checkpointer)
        if checkpointer.last is not None:
            last = checkpointer.last
            stalled = checkpointer.stall_seconds
            self.progress.checkpointed(last.step, last.path, last.time, stalled, last.kept, **pacing)
        elif pacing:
            self.progress.update(**pacing)

    def saved(self, step: int, path: str, at: float, kept: list[int]) -> None:
        """A checkpoint others saved for the job (parameter-server mode: the servers save, worker 0 reports)."""
        if self.progress is not None:
            self.progress.checkpointed(step, path, at, kept=kept)

    def alive(self) -> None:
        """A heartbeat without a step: rank 0 is waiting, not stalled (worker 0 waiting for slower workers)."""
        if self.progress is not None:
            self.progress.alive()

    def update(self, **fields: Any) -> None:
        """Extra fields (the final summary)."""
        if self.progress is not None:
            self.progress.update(**fields)

    def close(self) -> None:
        """Final file and termination message; stop the endpoint; flush the history."""
        if self.history is not None:
            self.history.close()
        if self.progress is not None:
            self.progress.close()
