"""Checkpoint writes that die or fail halfway: a complete checkpoint of the step survives, no temporary is left."""

import errno
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from trainer import checkpoint_store as store
from trainer.checkpoint import Checkpointer
from trainer.checkpoint_store import list_checkpoints, load_newest, write_checkpoint
from trainer.env import CheckpointPolicy

pytestmark = pytest.mark.fast

INJECTED = "injected by the test"


def injected(code: int) -> OSError:
    """An OSError like the kernel's, marked as the test's."""
    return OSError(code, f"{os.strerror(code)} ({INJECTED})")


def record_disk_at_each_call(
    monkeypatch: pytest.MonkeyPatch, module: Any, function: str, root: Path, copies: Path
) -> list[Path]:
    """Patch module.function to copy `root` before each call: what a SIGKILL at that point would leave on disk."""
    real: Callable[..., Any] = getattr(module, function)
    disks: list[Path] = []

    def copy_then_call(*args: Any, **kwargs: Any) -> Any:
        disk = copies / f"kill-{len(disks)}"
        shutil.copytree(root, disk)
        disks.append(disk)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, function, copy_then_call)
    return disks


def weights_at(root: Path) -> tuple[int, float] | None:
    """The step and the weight value a resume from `root` would get."""
    found = load_newest(root)
    return None if found is None else (found[0].step, float(found[1]["w"][0]))


def names_in(root: Path) -> list[str]:
    return sorted(path.name for path in root.iterdir())


@pytest.mark.parametrize(
    ("module", "function"),
    [(os, "rename"), (shutil, "rmtree")],
    ids=["kill-before-each-rename", "kill-before-each-removal"],
)
def test_a_kill_while_resaving_a_step_never_leaves_it_without_a_complete_checkpoint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, module: Any, function: str
) -> None:
    root = tmp_path / "checkpoints"
    checkpointer = Checkpointer(CheckpointPolicy(root, None, None, 1))
    checkpointer.save(5, {"w": torch.zeros(2)})
    disks = record_disk_at_each_call(monkeypatch, module, function, root, tmp_path / "killed")
    checkpointer.save(5, {"w": torch.ones(2)})
    monkeypatch.undo()
    assert disks, f"the re-save never called {function}"
    for disk in disks:
        assert weights_at(disk) in [(5, 0.0), (5, 1.0)], f"{disk.name}: {names_in(disk)}"
    assert weights_at(root) == (5, 1.0)
    for disk in disks:  # the next attempt resumes there, saves, and is left with exactly keep-last-1
        Checkpointer(CheckpointPolicy(disk, None, None, 1)).save(6, {"w": torch.full((2,), 2.0)})
        assert names_in(disk) == ["step-6"], disk.name


def fail_writing(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """The disk is full when the writer comes to the file `name`."""
    real = store._write_synced

    def write(path: Path, data: bytes) -> None:
        if path.name == name:
            raise injected(errno.ENOSPC)
        real(path, data)

    monkeypatch.setattr(store, "_write_synced", write)


def fail_renaming_in(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """The rename of a temporary folder onto its `step-N` name fails."""
    real = os.rename

    def rename(source: Any, target: Any) -> None:
        if Path(source).name.startswith(store.TEMP_PREFIX):
            raise injected(errno.EIO)
        real(source, target)

    monkeypatch.setattr(os, "rename", rename)


@pytest.mark.parametrize(
    ("fail", "name", "step"),
    [
        (fail_writing, store.STATE_FILE, 2),
        (fail_writing, store.MARKER_FILE, 2),
        (fail_writing, store.STATE_FILE, 1),
        (fail_renaming_in, "", 2),
        (fail_renaming_in, "", 1),
    ],
    ids=["state-file", "marker", "state-file-same-step", "rename-in", "rename-in-same-step"],
)
def test_a_failed_write_removes_its_temporary_folder_and_keeps_the_last_checkpoint(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    fail: Callable[[pytest.MonkeyPatch, str], None],
    name: str,
    step: int,
) -> None:
    write_checkpoint(tmp_path, 1, {"step": 1, "w": torch.zeros(2)})
    fail(monkeypatch, name)
    with pytest.raises(OSError, match=INJECTED):
        write_checkpoint(tmp_path, step, {"step": step, "w": torch.ones(2)})
    monkeypatch.undo()
    assert names_in(tmp_path) == ["step-1"]
    assert weights_at(tmp_path) == (1, 0.0)


def test_a_write_first_clears_temporary_folders_a_killed_writer_left(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    write_checkpoint(tmp_path, 1, {"step": 1, "w": torch.zeros(2)})
    stale = tmp_path / f"{store.TEMP_PREFIX}step-2-dead"
    stale.mkdir()
    (stale / store.STATE_FILE).write_bytes(b"x" * 1024)
    fail_writing(monkeypatch, store.STATE_FILE)
    with pytest.raises(OSError, match=INJECTED):
        write_checkpoint(tmp_path, 2, {"step": 2, "w": torch.ones(2)})
    assert names_in(tmp_path) == ["step-1"]
    assert [(entry.step, entry.complete) for entry in list_checkpoints(tmp_path)] == [(1, True)]
