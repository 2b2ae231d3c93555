"""What the search (TPE) and early stopping learn from the finished trials the status no longer lists: a compact
record of each summarised trial that succeeded with an objective or was pruned (a failed trial teaches neither),
packed and kept in status.summarised.learned (base64), appended to as trials are summarised, read back on every
reconcile. So the learners see every finished trial, however many the sweep has run, in a status under 1 MiB.

A record (little-endian): the trial's number (uint16), its phase and the curve's form (uint8), its objective
(float32; NaN for none), each parameter in the spec's order (a Categorical's index as uint8, a Float's or Int's value
as float32: read back within its range, on its step), its totalSteps (uint32; 0 for none) when it is not the
template's trainer.steps, its curve's point count (uint8), then the curve's values (float16: about 3 significant
digits) at its sixteenths of totalSteps (trials.curve), or, for a curve taken without totalSteps, each point's step
(uint32) and value. The records take at most LEARNED_BUDGET_BYTES (700 KiB of base64): 10,000 trials fit with
16-point curves and up to 4 parameters (3 ranges and a Categorical: 53 bytes a record, 71 as base64); past the
budget a record is kept without its curve (TPE still sees it, the median rule does not), and past that not at all
(the trial is counted in the summary only)."""

import base64
import math
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import NamedTuple

from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution

from trainingjob.model.sweep import TrainingSweepSpec
from trainingjob.model.sweep_space import Value
from trainingjob.model.sweep_status import MAX_LEARNED, Trial, TrialPhase
from trainingjob.sweep.space import distributions
from trainingjob.sweep.trials import marks

LEARNED_BUDGET_BYTES = MAX_LEARNED
_PHASES = (TrialPhase.SUCCEEDED, TrialPhase.PRUNED)
_OWN_TOTAL, _STEPS_GIVEN = 0x10, 0x20  # flags beside the phase: totalSteps follows; each point has its step
_HEAD = struct.Struct("<HBf")


def teaches(trial: Trial) -> bool:
    """Whether the learners use the trial: succeeded with an objective, or pruned."""
    return trial.phase == TrialPhase.PRUNED or (trial.phase == TrialPhase.SUCCEEDED and trial.objective is not None)


def _default_total(spec: TrainingSweepSpec) -> int:
    trainer = spec.template.spec.trainer
    return trainer.steps if trainer is not None and trainer.steps else 0


def _parameters(space: dict[str, BaseDistribution], trial: Trial) -> bytes | None:
    packed = b""
    for name, dist in space.items():
        if name not in trial.parameters:
            return None
        try:
            internal = dist.to_internal_repr(trial.parameters[name])
        except ValueError:
            return None
        packed += struct.pack("<B" if isinstance(dist, CategoricalDistribution) else "<f", internal)
    return packed


def _curve(trial: Trial, default_total: int, with_curve: bool) -> tuple[int, bytes]:
    """The flags and the packed curve."""
    points = trial.curve if with_curve else []
    total = trial.total_steps or 0
    flags, packed = 0, b""
    if total != default_total:
        flags, packed = _OWN_TOTAL, struct.pack("<I", total)
    steps = [p.step for p in points]
    if total and steps == marks(total)[: len(steps)]:
        return flags, packed + struct.pack(f"<B{len(points)}e", len(points), *(p.value for p in points))
    pairs = [x for p in points for x in (p.step, p.value)]
    return flags | _STEPS_GIVEN, packed + struct.pack("<B" + "Ie" * len(points), len(points), *pairs)


def record(spec: TrainingSweepSpec, trial: Trial, *, with_curve: bool = True) -> bytes | None:
    """The trial's record; None for a trial the learners do not use (or whose parameters are not the spec's)."""
    parameters = _parameters(distributions(spec.parameters), trial) if teaches(trial) else None
    if parameters is None:
        return None
    flags, curve = _curve(trial, _default_total(spec), with_curve)
    objective = math.nan if trial.objective is None else trial.objective
    return _HEAD.pack(trial.number, _PHASES.index(trial.phase) | flags, objective) + parameters + curve


def appended(spec: TrainingSweepSpec, learned: str | None, trials: Sequence[Trial]) -> str | None:
    """`learned` with the records of `trials` (being summarised) added, within LEARNED_BUDGET_BYTES."""
    packed = bytearray(base64.b64decode(learned) if learned else b"")
    for trial in sorted(trials, key=lambda t: t.number):
        for with_curve in (True, False):
            found = record(spec, trial, with_curve=with_curve)
            if found is not None and _encoded(len(packed) + len(found)) <= LEARNED_BUDGET_BYTES:
                packed += found
                break
    return base64.b64encode(packed).decode() if packed else None


@cache
def _marks(total: int) -> tuple[int, ...]:
    return tuple(marks(total))


def _encoded(size: int) -> int:
    return 4 * math.ceil(size / 3)


def _decoder(dist: BaseDistribution) -> Callable[[float], Value]:
    """How a parameter's recorded value reads back within its distribution (float32 may have left it)."""
    if isinstance(dist, CategoricalDistribution):
        choices = [c for c in dist.choices if c is not None]  # a sweep's never are None
        return lambda raw: choices[min(int(raw), len(choices) - 1)]
    assert isinstance(dist, FloatDistribution | IntDistribution)
    low, high, step, whole = dist.low, dist.high, dist.step, isinstance(dist, IntDistribution)

    def value(raw: float) -> Value:
        inside = min(max(raw, low), high)
        if step is not None:
            inside = min(max(low + round((inside - low) / step) * step, low), high)
        return round(inside) if whole else float(inside)

    return value


class Point(NamedTuple):
    """A recorded curve's point: its step and value, as an ObjectivePoint's."""

    step: int
    value: float


@dataclass(frozen=True, slots=True)
class Learned:
    """A summarised trial as the learners read it (sweep.study.Known): its curve kept as its steps and values, made
    into points only where asked (a reconcile reads thousands of records; the median rule reads steps and values)."""

    number: int
    phase: TrialPhase
    objective: float | None
    parameters: dict[str, Value]
    steps: Sequence[int]
    values: Sequence[float]

    @property
    def curve(self) -> list[Point]:
        return [Point(step, value) for step, value in zip(self.steps, self.values, strict=False)]


def unpacked(spec: TrainingSweepSpec, learned: str | None) -> list[Learned]:
    """The summarised trials the learners use, from their records (the operator wrote them)."""
    if not learned:
        return []
    packed, at, found = base64.b64decode(learned), 0, []
    space, default_total = distributions(spec.parameters), _default_total(spec)
    names, decoders = list(space), [_decoder(d) for d in space.values()]
    params = struct.Struct(
        "<" + "".join("B" if isinstance(d, CategoricalDistribution) else "f" for d in space.values())
    )
    while at < len(packed):
        number, flags, objective = _HEAD.unpack_from(packed, at)
        raw = params.unpack_from(packed, at + _HEAD.size)
        at += _HEAD.size + params.size
        total = default_total
        if flags & _OWN_TOTAL:  # 0: none known
            (total,) = struct.unpack_from("<I", packed, at)
            at += 4
        count = packed[at]
        at += 1
        if flags & _STEPS_GIVEN:
            pairs = struct.unpack_from("<" + "Ie" * count, packed, at)
            steps, values = pairs[::2], pairs[1::2]
            at += 6 * count
        else:
            steps, values = _marks(total)[:count], struct.unpack_from(f"<{count}e", packed, at)
            at += 2 * count
        parameters = {name: decode(r) for name, decode, r in zip(names, decoders, raw, strict=True)}
        objective = None if math.isnan(objective) else objective
        found.append(Learned(number, _PHASES[flags & 0x0F], objective, parameters, steps, values))
    return found
