"""Checkpoint folders: keep-last-K, newest-complete selection, atomic writes, corrupt ones skipped."""

from pathlib import Path

import pytest
import torch

from trainer.checkpoint import Checkpointer
from trainer.checkpoint_store import (
    CheckpointEntry,
    list_checkpoints,
    load_newest,
    newest_complete_first,
    parse_step,
    prune,
    select_to_delete,
    write_checkpoint,
)
from trainer.env import CheckpointPolicy

pytestmark = pytest.mark.fast


def entries(*specs: tuple[int, bool]) -> list[CheckpointEntry]:
    return [CheckpointEntry(step, Path(f"step-{step}"), complete) for step, complete in specs]


@pytest.mark.parametrize(
    ("name", "step"),
    [("step-0", 0), ("step-120", 120), (".tmp-step-5-ab", None), ("step-x", None), ("stepped", None)],
    ids=["zero", "number", "temporary", "not-a-number", "other"],
)
def test_parse_step(name: str, step: int | None) -> None:
    assert parse_step(name) == step


def test_newest_complete_first_ignores_partial_ones() -> None:
    found = newest_complete_first(entries((10, True), (30, False), (20, True)))
    assert [entry.step for entry in found] == [20, 10]


@pytest.mark.parametrize(
    ("specs", "keep", "deleted"),
    [
        ([(10, True), (20, True), (30, True)], 2, [10]),
        ([(10, True), (20, True)], 2, []),
        ([(10, True), (15, False), (20, True), (30, True)], 2, [10, 15]),
        ([(10, True), (20, True), (30, False)], 2, []),
        ([(10, True), (20, True), (30, True)], 1, [10, 20]),
    ],
    ids=["drops-oldest", "exactly-k", "drops-partial-below", "partial-newest-not-counted", "keep-one"],
)
def test_select_to_delete(specs: list[tuple[int, bool]], keep: int, deleted: list[int]) -> None:
    assert [entry.step for entry in select_to_delete(entries(*specs), keep)] == deleted


def test_write_is_complete_and_prune_keeps_last_k(tmp_path: Path) -> None:
    for step in (1, 2, 3):
        write_checkpoint(tmp_path, step, {"step": step, "w": torch.full((2,), float(step))})
    (tmp_path / ".tmp-step-4-dead").mkdir()
    prune(tmp_path, keep=2)
    assert [(entry.step, entry.complete) for entry in list_checkpoints(tmp_path)] == [(2, True), (3, True)]
    assert not (tmp_path / ".tmp-step-4-dead").exists()


def test_corrupt_newest_is_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_checkpoint(tmp_path, 1, {"step": 1})
    newest = write_checkpoint(tmp_path, 2, {"step": 2})
    assert newest is not None
    (newest / "state.pt").write_bytes(b"garbage")
    found = load_newest(tmp_path)
    assert found is not None and found[0].step == 1
    assert "skipping corrupt checkpoint" in caplog.text


def test_checkpointer_interval_and_async_save(tmp_path: Path) -> None:
    now = [0.0]
    checkpointer = Checkpointer(CheckpointPolicy(tmp_path, 5, 60.0, 2), asynchronous=True, clock=lambda: now[0])
    assert [step for step in range(12) if checkpointer.is_step_due(step)] == [5, 10]
    assert not checkpointer.is_time_due()
    now[0] = 60.0
    assert checkpointer.is_time_due()
    weights = torch.zeros(3)
    checkpointer.save(5, {"w": weights})
    weights += 1
    checkpointer.wait()
    state = checkpointer.load_latest()
    assert state is not None and state["step"] == 5 and torch.equal(state["w"], torch.zeros(3))
