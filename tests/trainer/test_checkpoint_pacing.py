"""checkpoint.everySteps: Auto without processes: the Young/Daly interval and its bounds, the live MTBF, what
TJ_CHECKPOINT_PACING may hold, and a Checkpointer on a fake clock whose saves take a known time."""

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch

from trainer import checkpoint_store
from trainer.checkpoint import Checkpointer, checkpoint_root
from trainer.checkpoint_pacing import CheckpointPacer, Interval, PacingInputs, parse_pacing, young_daly
from trainer.env import CheckpointPolicy, read_env
from trainer.failures import ConfigError

pytestmark = pytest.mark.fast

PACING = {"auto": True, "failures": 3, "runningSeconds": 5400.0, "priorSeconds": 21600.0, "minSeconds": 5.0}


def pacing_text(**fields: Any) -> str:
    """TJ_CHECKPOINT_PACING as the operator writes it, with `fields` changed (None: left out)."""
    record = {**PACING, "maxSeconds": 3600.0, **fields}
    return json.dumps({name: value for name, value in record.items() if value is not None})


def inputs(**fields: Any) -> PacingInputs:
    return parse_pacing(pacing_text(**fields))


@pytest.mark.parametrize(
    ("save", "mtbf", "expected"),
    [
        pytest.param(2.0, 900.0, Interval(60.0, None), id="inside-the-bounds"),
        pytest.param(0.5, 1.0, Interval(5.0, "min"), id="below-min"),
        pytest.param(0.0, 1e6, Interval(5.0, "min"), id="a-free-save-is-clamped-up"),
        pytest.param(50.0, 1e6, Interval(3600.0, "max"), id="above-max"),
        pytest.param(12.5, 1.0, Interval(5.0, None), id="exactly-min-is-not-clamped"),
    ],
)
def test_young_daly_interval_and_its_bound(save: float, mtbf: float, expected: Interval) -> None:
    assert young_daly(save, mtbf, 5.0, 3600.0) == expected


@pytest.mark.parametrize(
    ("failures", "running", "elapsed", "expected"),
    [
        pytest.param(0, 0.0, 0.0, 21600.0, id="a-young-job-has-the-prior"),
        pytest.param(0, 600.0, 100.0, 22300.0, id="before-its-first-failure-the-prior-and-the-time-it-ran"),
        pytest.param(3, 5400.0, 0.0, 1800.0, id="then-its-own-record-the-prior-left-out"),
        pytest.param(3, 5400.0, 600.0, 2000.0, id="it-grows-while-the-attempt-runs"),
        pytest.param(2, 60.0, -5.0, 30.0, id="a-clock-before-the-start-counts-as-zero"),
    ],
)
def test_mtbf_is_live(failures: int, running: float, elapsed: float, expected: float) -> None:
    assert inputs(failures=failures, runningSeconds=running).mtbf(elapsed) == pytest.approx(expected)


def test_the_operators_record_parses_and_unknown_fields_are_ignored() -> None:
    parsed = parse_pacing(pacing_text(auto=False, priorSeconds=60, newerField={"x": 1}))
    assert parsed == PacingInputs(False, 3, 5400.0, 60.0, 5.0, 3600.0)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        pytest.param("{not json", "(root)", id="not-json"),
        pytest.param("[1, 2]", "(root)", id="not-an-object"),
        pytest.param(pacing_text(padding="x" * 1024), "(root)", id="over-1-KiB"),
        pytest.param(pacing_text(auto="yes"), "auto", id="auto-a-string"),
        pytest.param(pacing_text(auto=None), "auto", id="auto-missing"),
        pytest.param(pacing_text(failures=-1), "failures", id="negative-failures"),
        pytest.param(pacing_text(failures=1.5), "failures", id="fractional-failures"),
        pytest.param(pacing_text(failures=True), "failures", id="boolean-failures"),
        pytest.param(pacing_text(runningSeconds=-0.5), "runningSeconds", id="negative-running"),
        pytest.param(pacing_text(runningSeconds="10"), "runningSeconds", id="running-a-string"),
        pytest.param(pacing_text(priorSeconds=0), "priorSeconds", id="zero-prior"),
        pytest.param(pacing_text(priorSeconds=None), "priorSeconds", id="prior-missing"),
        pytest.param(pacing_text(minSeconds=0.0), "minSeconds", id="zero-min"),
        pytest.param(pacing_text(maxSeconds=1e400), "maxSeconds", id="infinite-max"),
        pytest.param(pacing_text(minSeconds=60.0, maxSeconds=30.0), "minSeconds", id="min-above-max"),
    ],
)
def test_a_malformed_record_names_the_variable_and_the_field(text: str, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_pacing(text)
    assert caught.value.field == field
    assert "TJ_CHECKPOINT_PACING" in str(caught.value) and f"'{field}'" in str(caught.value)


def test_the_environment_carries_the_pacing_and_auto_drops_a_fixed_interval() -> None:
    base = {"TJ_CHECKPOINT_DIR": "/ckpt", "TJ_CHECKPOINT_EVERY_STEPS": "40", "TJ_CHECKPOINT_EVERY_SECONDS": "60"}
    assert read_env(base).checkpoint.pacing is None
    fixed = read_env({**base, "TJ_CHECKPOINT_PACING": pacing_text(auto=False)}).checkpoint
    assert (fixed.every_steps, fixed.every_seconds, fixed.pacing) == (40, 60.0, inputs(auto=False))
    auto = read_env({**base, "TJ_CHECKPOINT_PACING": pacing_text()}).checkpoint
    assert (auto.every_steps, auto.every_seconds, auto.pacing) == (None, None, inputs())
    with pytest.raises(ConfigError) as caught:
        read_env({**base, "TJ_CHECKPOINT_PACING": pacing_text(minSeconds=-1)})
    assert caught.value.field == "minSeconds"


def test_a_parameter_server_shard_keeps_the_pacing(tmp_path: Path) -> None:
    policy = CheckpointPolicy(tmp_path, None, None, 2, inputs())
    assert checkpoint_root(policy, "ps-0") == CheckpointPolicy(tmp_path / "ps-0", None, None, 2, inputs())


class SlowSaves:
    """A fake clock that only moves when told, and a checkpoint write that takes `save_seconds` of it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, save_seconds: float) -> None:
        self.now = 1000.0
        self.save_seconds = save_seconds
        write = checkpoint_store.write_checkpoint

        def slow_write(*args: Any, **kwargs: Any) -> Any:
            self.now += self.save_seconds
            return write(*args, **kwargs)

        monkeypatch.setattr(checkpoint_store, "write_checkpoint", slow_write)

    def __call__(self) -> float:
        return self.now


def due_after(checkpointer: Checkpointer, clock: SlowSaves, seconds: float) -> bool:
    """Whether a time-based save is due `seconds` after the last one, the clock left there."""
    clock.now = checkpointer._last_save_at + seconds
    return checkpointer.is_time_due()


def test_auto_saves_first_at_min_then_at_the_interval_the_measured_stall_gives(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    clock = SlowSaves(monkeypatch, save_seconds=2.0)
    pacing = inputs(failures=0, runningSeconds=0.0, priorSeconds=900.0, minSeconds=5.0, maxSeconds=3600.0)
    checkpointer = Checkpointer(CheckpointPolicy(tmp_path, None, None, 2, pacing), clock=clock)
    unmeasured = {"intervalSeconds": 5.0, "optimalSeconds": None, "saveSeconds": None, "bound": None}
    assert checkpointer.pacing_report() == {"auto": True, **unmeasured, "mtbfSeconds": 900.0}
    assert not due_after(checkpointer, clock, 4.999) and due_after(checkpointer, clock, 5.0)

    started = clock.now
    checkpointer.save(1, {"w": torch.zeros(2)})
    assert checkpointer.stall_seconds == 2.0
    mtbf = 900.0 + (clock.now - started + 5.0)  # the attempt ran 5 s, then 2 s of save
    tau = math.sqrt(2 * 2.0 * mtbf)
    assert checkpointer.interval_seconds == pytest.approx(tau)
    assert not due_after(checkpointer, clock, tau - 0.01) and due_after(checkpointer, clock, tau)
    paced = {"intervalSeconds": round(tau, 3), "optimalSeconds": round(tau, 3), "bound": None}
    assert checkpointer.pacing_report() == {"auto": True, **paced, "saveSeconds": 2.0, "mtbfSeconds": round(mtbf, 3)}

    clock.save_seconds = 0.0  # the mean stall per save halves: 2 s over two saves
    checkpointer.save(2, {"w": torch.ones(2)})
    second = math.sqrt(2 * 1.0 * (mtbf + tau))
    assert checkpointer.interval_seconds == pytest.approx(second)
    paced = {"intervalSeconds": round(second, 3), "optimalSeconds": round(second, 3), "bound": None}
    assert checkpointer.pacing_report() == {
        "auto": True,
        **paced,
        "saveSeconds": 1.0,
        "mtbfSeconds": round(mtbf + tau, 3),
    }


@pytest.mark.parametrize(
    ("every_seconds", "interval"),
    [pytest.param(60.0, 60.0, id="fixed-seconds-stay-in-force"), pytest.param(None, None, id="fixed-steps-only")],
)
def test_without_auto_the_fixed_interval_stays_and_auto_is_only_measured(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, every_seconds: float | None, interval: float | None
) -> None:
    clock = SlowSaves(monkeypatch, save_seconds=0.5)
    pacing = inputs(auto=False, failures=10, runningSeconds=0.0, priorSeconds=2.0, minSeconds=5.0)
    checkpointer = Checkpointer(CheckpointPolicy(tmp_path, 10, every_seconds, 2, pacing), clock=clock)
    assert checkpointer.interval_seconds == interval
    assert not due_after(checkpointer, clock, 30.0)  # Auto's minSeconds is not in force
    checkpointer.save(10, {"w": torch.zeros(2)})
    report = checkpointer.pacing_report()
    assert report is not None
    assert (report["auto"], report["intervalSeconds"], report["optimalSeconds"], report["bound"]) == (
        False,
        interval,
        5.0,
        "min",
    )
    assert checkpointer.is_step_due(20) and due_after(checkpointer, clock, 60.0) == (every_seconds is not None)


def test_without_a_volume_or_a_variable_there_is_nothing_to_pace(tmp_path: Path) -> None:
    assert Checkpointer(CheckpointPolicy(None, None, None, 2, inputs())).pacing_report() is None
    assert Checkpointer(CheckpointPolicy(tmp_path, 10, None, 2)).pacing_report() is None


def test_a_pacer_ignores_a_measure_of_no_saves() -> None:
    pacer = CheckpointPacer(inputs(), started_at=0.0)
    pacer.measured(10.0, 0.0, 0)
    assert (pacer.auto_seconds(), pacer.optimal, pacer.save_seconds) == (5.0, None, None)
