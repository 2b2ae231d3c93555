"""The attempt fence: once attempt N+1 has started on a checkpoint folder, a trainer of attempt N writes nothing
there (neither a checkpoint nor a pruning), even when the fence rises while its write is under way."""

import logging
from pathlib import Path

import pytest
import torch

from trainer import checkpoint_store as store
from trainer import faults
from trainer.checkpoint import Checkpointer
from trainer.checkpoint_store import list_checkpoints, raise_fence, read_fence, write_checkpoint
from trainer.env import CheckpointPolicy

pytestmark = pytest.mark.fast


def state(step: int) -> dict[str, object]:
    return {"model": {"weight": torch.full((2,), float(step))}, "step": step}


def test_the_fence_rises_and_is_never_lowered(tmp_path: Path) -> None:
    assert read_fence(tmp_path) == 0
    assert raise_fence(tmp_path, 3) == 3
    assert raise_fence(tmp_path, 2) == 3
    assert read_fence(tmp_path) == 3
    assert raise_fence(tmp_path, 4) == 4
    assert sorted(path.name for path in tmp_path.iterdir()) == [store.FENCE_FILE]  # no temporary left


def test_a_write_for_an_attempt_past_the_fence_is_refused(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert write_checkpoint(tmp_path, 40, state(40), attempt=2) is not None
    raise_fence(tmp_path, 3)
    with caplog.at_level(logging.ERROR):
        assert write_checkpoint(tmp_path, 80, state(80), attempt=2) is None
    assert "refusing to write step-80: attempt 2 is over, attempt 3 owns the checkpoints" in caplog.text
    assert [entry.step for entry in list_checkpoints(tmp_path)] == [40]
    assert write_checkpoint(tmp_path, 80, state(80), attempt=3) is not None
    assert write_checkpoint(tmp_path, 120, state(120), attempt=4) is not None


def test_a_fence_raised_during_the_write_stops_its_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Attempt 3 starts while attempt 2's write of step 80 is between its fsync and its rename."""
    monkeypatch.setattr(faults, "maybe_crash_before_rename", lambda step: raise_fence(tmp_path, 3))
    assert write_checkpoint(tmp_path, 80, state(80), attempt=2) is None
    assert list_checkpoints(tmp_path) == []
    assert sorted(path.name for path in tmp_path.iterdir()) == [store.FENCE_FILE]


def test_a_stale_checkpointer_neither_saves_nor_prunes(tmp_path: Path) -> None:
    policy = CheckpointPolicy(directory=tmp_path, every_steps=40, keep=1)
    Checkpointer(policy, attempt=1).save(40, state(40))
    current = Checkpointer(policy, attempt=2)
    current.raise_fence()
    stale = Checkpointer(policy, attempt=1)
    stale.save(80, state(80))
    stale.wait()
    assert stale.last is None
    assert [entry.step for entry in list_checkpoints(tmp_path)] == [40]  # keep=1 would have pruned step-40
    current.save(120, state(120))
    assert current.last is not None and current.last.step == 120
    assert [entry.step for entry in list_checkpoints(tmp_path)] == [120]


def test_the_first_attempt_and_checkpointers_without_an_attempt_leave_no_fence(tmp_path: Path) -> None:
    policy = CheckpointPolicy(directory=tmp_path)
    Checkpointer(policy, attempt=1).raise_fence()
    Checkpointer(policy).raise_fence()
    assert not (tmp_path / store.FENCE_FILE).exists()
    raise_fence(tmp_path, 5)
    Checkpointer(policy).save(10, state(10))  # parameter-server shards know no attempt: never fenced
    assert [entry.step for entry in list_checkpoints(tmp_path)] == [10]
