"""Test-only fault injection, switched on by environment variables the operator never sets."""

import logging
import os
import signal
import time

from trainer import contract

log = logging.getLogger(__name__)

KILL_AT_STEP = "TJ_TEST_KILL_AT_STEP"
KILL_RANK = "TJ_TEST_KILL_RANK"
CRASH_BEFORE_RENAME_STEP = "TJ_TEST_CRASH_BEFORE_RENAME_STEP"
STEP_DELAY_SECONDS = "TJ_TEST_STEP_DELAY_SECONDS"
SAVE_DELAY_SECONDS = "TJ_TEST_SAVE_DELAY_SECONDS"
HOLD_AFTER_EVALUATION = "TJ_TEST_HOLD_AFTER_EVALUATION"


def maybe_kill(step: int, rank: int) -> None:
    """SIGKILL this process after `step` if the test asked for it: no cleanup, no final checkpoint."""
    if os.environ.get(KILL_AT_STEP) == str(step) and os.environ.get(KILL_RANK, "0") == str(rank):
        log.error("test hook %s: rank %d sends itself SIGKILL after step %d", KILL_AT_STEP, rank, step)
        os.kill(os.getpid(), signal.SIGKILL)


def maybe_pause(step: int) -> None:
    """Stop this process (SIGSTOP) right after `step` when local mode's --kill asked for it: its runner then
    SIGKILLs it, exactly at the announced step however fast the machine trains. Only in the first attempt: a rank
    restarted in place keeps its pod's environment, and --kill kills once."""
    if os.environ.get(contract.PAUSE_AT_STEP) == str(step) and os.environ.get(contract.ATTEMPT, "1") == "1":
        log.warning("stopping after step %d: local mode kills this rank here (--kill)", step)
        os.kill(os.getpid(), signal.SIGSTOP)


def maybe_hold(step: int, rank: int) -> None:
    """Stop rank 0 (SIGSTOP) once its evaluation at `step` is in the progress report, if the test asked for it:
    whoever runs the process judges that evaluation before it goes on (a local sweep continues its trials' held
    processes once the sweep has judged them), so a verdict lands before the trial's next step at any speed."""
    if rank == 0 and os.environ.get(HOLD_AFTER_EVALUATION) == str(step):
        log.warning("test hook %s: holding after the evaluation at step %d", HOLD_AFTER_EVALUATION, step)
        os.kill(os.getpid(), signal.SIGSTOP)


def maybe_crash_before_rename(step: int) -> None:
    """Die like a killed writer: the checkpoint is on disk under its temporary name, never renamed."""
    if os.environ.get(CRASH_BEFORE_RENAME_STEP) == str(step):
        log.error("test hook %s: crashing before the rename of step %d", CRASH_BEFORE_RENAME_STEP, step)
        os._exit(137)


def maybe_delay_step(work: float = 1.0) -> None:
    """Make every training step this much slower, like a big model would; `work`: the rank's share of the step
    against its share at the job's full world (2 for a rank of an elastic job shrunk to half: twice the
    micro-batches, twice the time, as on a GPU)."""
    delay = os.environ.get(STEP_DELAY_SECONDS)
    if delay:
        time.sleep(float(delay) * work)


def maybe_delay_save() -> None:
    """Make every checkpoint write this much slower, like a big model on slow storage would."""
    delay = os.environ.get(SAVE_DELAY_SECONDS)
    if delay:
        time.sleep(float(delay))
