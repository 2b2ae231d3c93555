"""A checkpoint on request (trainer.checkpoint_request): rank 0's Checkpointer finds a checkpoint due while a request
for its attempt asks for one newer than any it has begun or resumed from; anything else in the file asks nothing."""

from pathlib import Path

import pytest

from trainer import checkpoint_request
from trainer.checkpoint import Checkpointer
from trainer.env import CheckpointPolicy

pytestmark = pytest.mark.fast


def checkpointer(root: Path, attempt: int = 2) -> Checkpointer:
    policy = CheckpointPolicy(root / "ckpt", None, None, 2, request_file=root / "request")
    return Checkpointer(policy, attempt=attempt)


@pytest.mark.parametrize(
    ("attempt", "after", "step", "due"),
    [
        pytest.param(2, 100, 101, True, id="asked-for-after-100-at-101"),
        pytest.param(2, 100, 100, False, id="not-before-a-newer-step"),
        pytest.param(1, 100, 150, False, id="another-attempts-ask"),
    ],
)
def test_an_ask_for_this_attempt_makes_a_checkpoint_due_past_its_step(
    tmp_path: Path, attempt: int, after: int, step: int, due: bool
) -> None:
    checkpoint_request.write(tmp_path / "request", attempt, after)
    assert checkpointer(tmp_path).is_requested(step) is due


def test_a_save_newer_than_the_ask_answers_it(tmp_path: Path) -> None:
    checkpoint_request.write(tmp_path / "request", 2, 100)
    saver = checkpointer(tmp_path)
    assert saver.is_requested(120)
    saver.save(120, {"weights": 1})
    assert not saver.is_requested(121) and saver.last is not None and saver.last.step == 120
    checkpoint_request.write(tmp_path / "request", 2, 120)  # asked again after it: one more
    assert saver.is_requested(125)


def test_a_background_save_under_way_answers_it_too(tmp_path: Path) -> None:
    checkpoint_request.write(tmp_path / "request", 2, 100)
    saver = checkpointer(tmp_path)
    saver.started_step = 110  # begun, not yet written
    assert not saver.is_requested(111)


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"not json",
        b"[2, 100]",
        b'{"attempt": 2, "afterStep": "100"}',
        b'{"attempt": 2, "afterStep": -5}',
        b'{"attempt": 2, "afterStep": true}',
        b'{"attempt": 2, "afterStep": 1' + b"0" * 1000 + b"}",
    ],
    ids=["empty", "garbage", "a-list", "a-string", "negative", "a-bool", "too-long"],
)
def test_a_request_file_it_cannot_read_asks_nothing(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "request").write_bytes(content)
    assert not checkpointer(tmp_path).is_requested(10**6)


def test_without_a_request_file_or_a_checkpoint_folder_nothing_is_asked(tmp_path: Path) -> None:
    assert not checkpointer(tmp_path).is_requested(5)  # no file written
    checkpoint_request.write(tmp_path / "request", 2, 1)
    policy = CheckpointPolicy(None, None, None, 2, request_file=tmp_path / "request")
    assert not Checkpointer(policy, attempt=2).is_requested(5)
