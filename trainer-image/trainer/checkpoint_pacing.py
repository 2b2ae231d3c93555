"""`checkpoint.everySteps: Auto`: checkpoints paced to the job's failure rate (Young/Daly).

The operator hands the trainer the job's failure history and the interval's bounds in TJ_CHECKPOINT_PACING, a JSON
object: {"auto", "failures", "runningSeconds", "priorSeconds", "minSeconds", "maxSeconds"}. Saving too often wastes
the time saves stall training; too rarely, the work lost to each failure. Young/Daly balance the two: the interval
that loses least is about sqrt(2 x seconds a save stalls x mean time between failures).

The mean time between failures is the job's own record once it has failed: MTBF(t) = (runningSeconds + t) /
failures, t the seconds this attempt has run (so it grows while the attempt keeps running). Before its first failure
a job has no record: it is assumed to fail no more often than the prior, plus the time it has run without failing,
MTBF(t) = priorSeconds + runningSeconds + t. (A prior that counted as one failure among the job's own would hold a
job failing every minute to hours-long intervals for hundreds of failures.) The stall per save is measured, so the
first save comes early (at minSeconds) to measure it.

Pure (no torch): the in-place agent validates the operator's orders with `parse_pacing` too.
"""

import json
import math
from dataclasses import dataclass
from typing import Any, Literal

from trainer.contract import CHECKPOINT_PACING
from trainer.failures import ConfigError

MAX_BYTES = 1024
Bound = Literal["min", "max"]
_NUMBERS = ("runningSeconds", "priorSeconds", "minSeconds", "maxSeconds")


@dataclass(frozen=True)
class PacingInputs:
    """TJ_CHECKPOINT_PACING, validated. `auto` False: a fixed interval stays in force, Auto's is only reported."""

    auto: bool
    failures: int
    running_seconds: float
    prior_seconds: float
    min_seconds: float
    max_seconds: float

    def mtbf(self, elapsed: float) -> float:
        """The mean time between failures `elapsed` seconds into this attempt: the job's running time over its
        failures, or before its first the prior plus the time it has run (it grows while the attempt lasts)."""
        running = self.running_seconds + max(0.0, elapsed)
        return running / self.failures if self.failures else self.prior_seconds + running


@dataclass(frozen=True)
class Interval:
    """A checkpoint interval, and the bound that set it (None: Young/Daly's own value)."""

    seconds: float
    bound: Bound | None


def young_daly(save_seconds: float, mtbf_seconds: float, lowest: float, highest: float) -> Interval:
    """sqrt(2 x save x MTBF), clamped to [lowest, highest]."""
    optimal = math.sqrt(2.0 * max(0.0, save_seconds) * max(0.0, mtbf_seconds))
    if optimal < lowest:
        return Interval(lowest, "min")
    if optimal > highest:
        return Interval(highest, "max")
    return Interval(optimal, None)


def _error(field: str, problem: str) -> ConfigError:
    return ConfigError(CHECKPOINT_PACING, field, problem)


def _number(data: dict[str, Any], name: str, *, positive: bool) -> float:
    value = data.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _error(name, f"must be a finite number, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise _error(name, f"must be {'> 0' if positive else '>= 0'}, got {value!r}")
    return float(value)


def parse_pacing(text: str) -> PacingInputs:
    """TJ_CHECKPOINT_PACING's text -> PacingInputs; a ConfigError names the bad field ("(root)" for the whole text).
    Fields this trainer does not know are ignored: a newer operator may send more."""
    if len(text.encode()) > MAX_BYTES:
        raise _error("(root)", f"must be at most {MAX_BYTES} bytes, got {len(text.encode())}")
    try:
        data = json.loads(text)
    except ValueError as error:
        raise _error("(root)", f"not valid JSON: {error}") from None
    if not isinstance(data, dict):
        raise _error("(root)", f"must be a JSON object, got {type(data).__name__}")
    if not isinstance(data.get("auto"), bool):
        raise _error("auto", f"must be true or false, got {data.get('auto')!r}")
    failures = data.get("failures")
    if isinstance(failures, bool) or not isinstance(failures, int) or failures < 0:
        raise _error("failures", f"must be an integer >= 0, got {failures!r}")
    running, prior, lowest, highest = (_number(data, name, positive=name != "runningSeconds") for name in _NUMBERS)
    if lowest > highest:
        raise _error("minSeconds", f"must be <= maxSeconds ({highest:g}), got {lowest:g}")
    return PacingInputs(data["auto"], failures, running, prior, lowest, highest)


class CheckpointPacer:
    """One attempt's Auto interval: minSeconds until a save was measured, then Young/Daly from the stall per save
    so far and the MTBF at that save, recomputed after every save (so the interval in force holds between saves)."""

    def __init__(self, inputs: PacingInputs, started_at: float) -> None:
        self.inputs = inputs
        self.started_at = started_at
        self.mtbf_seconds = inputs.mtbf(0.0)
        self.save_seconds: float | None = None
        self.optimal: Interval | None = None

    def measured(self, now: float, stall_seconds: float, saves: int) -> None:
        """After a save: the mean stall per save so far and the MTBF now give the next interval."""
        if saves < 1:
            return
        self.save_seconds = stall_seconds / saves
        self.mtbf_seconds = self.inputs.mtbf(now - self.started_at)
        self.optimal = young_daly(
            self.save_seconds, self.mtbf_seconds, self.inputs.min_seconds, self.inputs.max_seconds
        )

    def auto_seconds(self) -> float:
        """Auto's interval in force: minSeconds before the first measured save (it measures the stall)."""
        return self.optimal.seconds if self.optimal is not None else self.inputs.min_seconds

    def report(self, interval_seconds: float | None) -> dict[str, Any]:
        """The progress report's "checkpointPacing"; `interval_seconds` is the interval in force (Auto's, the fixed
        everySeconds, or None when only everySteps is fixed)."""
        return {
            "auto": self.inputs.auto,
            "intervalSeconds": _rounded(interval_seconds),
            "optimalSeconds": _rounded(self.optimal.seconds if self.optimal is not None else None),
            "saveSeconds": _rounded(self.save_seconds),
            "mtbfSeconds": round(self.mtbf_seconds, 3),
            "bound": self.optimal.bound if self.optimal is not None else None,
        }


def _rounded(value: float | None) -> float | None:
    return round(value, 3) if value is not None else None
