"""The trainer's failure kinds, each mapped to the exit code the operator classifies."""

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from trainer.contract import TRAINER_CONFIG, ExitCode

log = logging.getLogger(__name__)


class TrainerError(Exception):
    """A failure the trainer understands: it knows which exit code tells the operator what to do."""

    exit_code: ExitCode = ExitCode.RETRYABLE


class ConfigError(TrainerError):
    """Bad configuration: restarting cannot help."""

    exit_code = ExitCode.PERMANENT

    def __init__(self, source: str, field: str, problem: str) -> None:
        super().__init__(f"invalid {source}: field '{field}': {problem}")
        self.source = source
        self.field = field
        self.problem = problem


class RetryableError(TrainerError):
    """A transient failure (a peer died, a rendezvous timed out): a restart from the checkpoint can help."""

    exit_code = ExitCode.RETRYABLE


def combine_exit_codes(codes: list[int], preempted: bool) -> ExitCode:
    """One exit code for a pod from its local ranks' codes; signals (negative codes) count as retryable."""
    if any(code == ExitCode.PERMANENT for code in codes):
        return ExitCode.PERMANENT
    failed = [code for code in codes if code not in (ExitCode.SUCCEEDED, ExitCode.PREEMPTED)]
    if failed:
        return ExitCode.RETRYABLE
    if preempted or any(code == ExitCode.PREEMPTED for code in codes):
        return ExitCode.PREEMPTED
    return ExitCode.SUCCEEDED


# What a bug in a recipe's function raises: the same at every retry, so the job fails at once (exit 78) rather than
# restarting until its backoffLimit. RuntimeError (CUDA out of memory, a peer gone) stays retryable.
_BUGS = (TypeError, ValueError, KeyError, IndexError, AttributeError, NameError, AssertionError, ZeroDivisionError)


@contextmanager
def user_code(function: str) -> Iterator[None]:
    """Run a recipe function: a bug in it becomes a ConfigError naming the entrypoint and the function."""
    try:
        yield
    except _BUGS as error:
        log.exception("the recipe's %s failed", function)
        problem = f"the recipe's {function} raised {type(error).__name__}: {error}"
        raise ConfigError(TRAINER_CONFIG, "entrypoint", problem) from None
