"""An elastic job in local mode with the built-in trainer, end to end: two of its four workers lost, it goes on at
two, and once the room returns it asks rank 0 (through its agent) for a checkpoint and grows back at it, rather than
wait for the periodic one.

The job's periodic checkpoint never comes before its end (everySteps past its steps), so the only way it can grow
back before it ends is the checkpoint it asks for; its steps are slowed (the trainer's step-delay hook) so that the
room returns long before its end at any machine speed; local mode's capacity follows the furthest step the job got
to, so the loss and the return happen once, wherever the job resumes from."""

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.support.cli import REPO

from trainingjob.local.capacity import Capacity
from trainingjob.local.cluster import LOCAL_SETTINGS, run_local
from trainingjob.plan import Event

pytestmark = pytest.mark.e2e

STEPS, LOST_AT, BACK_AT = 600, 60, 150


def slow_elastic_job() -> dict[str, Any]:
    manifest = yaml.safe_load((REPO / "examples" / "digits-ddp-elastic.yaml").read_text())
    spec = manifest["spec"]
    spec["trainer"]["steps"] = STEPS
    spec["checkpoint"]["everySteps"] = 10 * STEPS  # none before the end: only an asked one can be grown at
    return dict(manifest)


def test_an_elastic_job_shrinks_when_workers_are_lost_and_grows_back_at_the_checkpoint_it_asks_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TJ_TEST_STEP_DELAY_SECONDS", "0.05")  # at most 20 steps/s; local pods inherit it
    events: list[Event] = []
    settings = replace(LOCAL_SETTINGS, resize_interval_seconds=1.0)  # grow as soon as the room is back
    capacity = Capacity(((0, 4), (LOST_AT, 2), (BACK_AT, 4)))
    status, _ = run_local(slow_elastic_job(), tmp_path, on_event=events.append, settings=settings, capacity=capacity)
    assert status is not None and status.phase.value == "Succeeded", status
    resized = [e.message for e in events if e.reason == "Resized"]
    assert len(resized) == 2 and "Shrinking from 4 to 2" in resized[0] and "Growing from 2 to 4" in resized[1]
    assert status.scale is not None and status.scale.workers == "4/4"
    assert status.history is not None
    grown = status.history.attempts[-1]
    assert grown.resumed_from_step is not None and BACK_AT <= grown.resumed_from_step < STEPS, grown
    assert status.restarts.total in (0, status.restarts.disruption)  # the loss, not a fault
    shrunk = [a for a in status.history.attempts if a.workers is not None]
    assert [(a.workers, a.desired_workers) for a in shrunk] == [(2, 4)], status.history.attempts
    assert status.goodput is not None and status.goodput.shrunk_seconds > 0, status.goodput  # half its training
