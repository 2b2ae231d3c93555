"""The status' last checkpoint is the newest complete one on the volume: an attempt that resumed says from its
start which one it resumed from (so a suspended rank's final checkpoint the operator never saw still reaches the
status, the attempt's record and the history), and the history lists each checkpoint once, without the steps kept
beside it."""

import pytest
from tests.support.builders import at, pods_of, running, step, with_policy

from trainingjob.model import CheckpointStatus, Progress

pytestmark = pytest.mark.fast


def _checkpoint(number: int, second: float, kept: list[int] | None = None) -> CheckpointStatus:
    return CheckpointStatus(step=number, path=f"/checkpoints/step-{number}", time=at(second), kept=kept)


def test_the_checkpoint_an_attempt_resumed_from_replaces_the_one_the_operator_last_saw() -> None:
    job = running()
    report = Progress(step=6100, attempt=1, last_heartbeat_time=at(10))
    job, _ = step(job, pods_of(job, 1), at(10), progress=report, checkpoint=_checkpoint(6000, 9, [6000, 5000]))
    job, _ = step(with_policy(job, suspend=True), pods_of(job, 1), at(20))  # the final checkpoint, 6221, unseen
    job, _ = step(with_policy(job, suspend=False), [], at(30))
    resumed = Progress(step=6221, attempt=2, resumed_from_step=6221, last_heartbeat_time=at(41))
    job, _ = step(job, pods_of(job, 2), at(41), progress=resumed, checkpoint=_checkpoint(6221, 25, [6221, 6000]))
    status = job.status
    assert status and status.last_checkpoint == _checkpoint(6221, 25, [6221, 6000])
    assert status.history and [a.resumed_from_step for a in status.history.attempts] == [None, 6221]
    assert status.history.checkpoints == [_checkpoint(6000, 9), _checkpoint(6221, 25)]


def test_a_checkpoint_said_again_with_another_time_is_listed_once() -> None:
    job = running()
    job, _ = step(job, pods_of(job, 1), at(10), checkpoint=_checkpoint(40, 9, [40]))
    job, _ = step(job, pods_of(job, 1), at(11), checkpoint=_checkpoint(40, 8, [40]))
    assert job.status and job.status.history and job.status.history.checkpoints == [_checkpoint(40, 9)]
