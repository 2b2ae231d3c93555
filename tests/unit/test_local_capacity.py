"""Local mode's worker slots (`tjctl run --capacity`): how many at the job's step (or second of the run), the room
left, and which waiting pods a freed slot places; and the flag's forms, good and bad."""

import argparse
import time

import pytest

from tjctl.cli import _capacity
from trainingjob.local.capacity import Capacity, Waiting

pytestmark = pytest.mark.fast
SCHEDULE = ((0, 4), (150, 2), (300, 4))


@pytest.mark.parametrize(("step", "slots"), [(0, 4), (149, 4), (150, 2), (299, 2), (300, 4), (10_000, 4)], ids=str)
def test_the_slots_follow_the_jobs_step(step: int, slots: int) -> None:
    assert Waiting(Capacity(SCHEDULE), step=step).slots == slots


@pytest.mark.parametrize(("elapsed", "slots"), [(0, 4), (149, 4), (151, 2), (301, 4)], ids=str)
def test_a_schedule_in_seconds_follows_the_clock_whatever_the_step(elapsed: float, slots: int) -> None:
    waiting = Waiting(Capacity(SCHEDULE, seconds=True), step=200, began=time.monotonic() - elapsed)
    assert waiting.slots == slots


def test_a_freed_slot_places_the_pod_that_waited_longest_and_the_room_counts_the_waiting() -> None:
    waiting = Waiting(Capacity(((0, 3),)))
    for name in ("w-2", "w-3"):
        waiting.hold({"metadata": {"name": name, "labels": {}}, "spec": {}})
    assert waiting.spare(running_workers=2) == 0  # one free slot, and two pods wait for it
    assert [p["metadata"]["name"] for p in waiting.placeable(running_workers=2)] == ["w-2"]
    assert list(waiting.pods) == ["w-3"] and waiting.spare(running_workers=3) == 0
    assert waiting.drop("w-3", waiting.pods["w-3"]["metadata"]["uid"]) and waiting.spare(running_workers=1) == 2
    condition = Waiting(Capacity(((0, 1),)))
    held = condition.hold({"metadata": {"name": "w-1", "labels": {}}, "spec": {}})
    assert condition.pods["w-1"]["status"]["conditions"][0]["reason"] == "Unschedulable" and held


@pytest.mark.parametrize(
    ("text", "capacity"),
    [
        ("2", Capacity(((0, 2),))),
        ("4,2@150,4@300", Capacity(SCHEDULE)),
        ("3@10", Capacity(((10, 3),))),
        ("4,2@150s,4@300s", Capacity(SCHEDULE, seconds=True)),
    ],
    ids=str,
)
def test_the_capacity_flag_reads_slots_from_steps_or_seconds_on(text: str, capacity: Capacity) -> None:
    assert _capacity(text) == capacity


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("0", "'0'"),
        ("4,2", "'2'"),
        ("4,2@x", "'2@x'"),
        ("4,2@150,1@100", "must increase"),
        ("4,2@60s,4@300", "'4@300': every change at a step"),
        ("four", "'four'"),
    ],
    ids=str,
)
def test_a_capacity_flag_it_cannot_read_is_refused_naming_the_part(text: str, named: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=named):
        _capacity(text)
