"""Local mode's worker slots (`tjctl run --capacity`): how many at the job's step, the room left, and which waiting
pods a freed slot places; and the flag's forms."""

import pytest

from tjctl.cli import _capacity
from trainingjob.local.capacity import Waiting

pytestmark = pytest.mark.fast
SCHEDULE = ((0, 4), (150, 2), (300, 4))


@pytest.mark.parametrize(("step", "slots"), [(0, 4), (149, 4), (150, 2), (299, 2), (300, 4), (10_000, 4)], ids=str)
def test_the_slots_follow_the_jobs_step(step: int, slots: int) -> None:
    assert Waiting(SCHEDULE, step=step).slots == slots


def test_a_freed_slot_places_the_pod_that_waited_longest_and_the_room_counts_the_waiting() -> None:
    waiting = Waiting(((0, 3),))
    for name in ("w-2", "w-3"):
        waiting.hold({"metadata": {"name": name, "labels": {}}, "spec": {}})
    assert waiting.spare(running_workers=2) == 0  # one free slot, and two pods wait for it
    assert [p["metadata"]["name"] for p in waiting.placeable(running_workers=2)] == ["w-2"]
    assert list(waiting.pods) == ["w-3"] and waiting.spare(running_workers=3) == 0
    assert waiting.drop("w-3", waiting.pods["w-3"]["metadata"]["uid"]) and waiting.spare(running_workers=1) == 2
    condition = Waiting(((0, 1),))
    held = condition.hold({"metadata": {"name": "w-1", "labels": {}}, "spec": {}})
    assert condition.pods["w-1"]["status"]["conditions"][0]["reason"] == "Unschedulable" and held


@pytest.mark.parametrize(
    ("text", "schedule"), [("2", ((0, 2),)), ("4,2@150,4@300", SCHEDULE), ("3@10", ((10, 3),))], ids=str
)
def test_the_capacity_flag_reads_slots_from_steps_on(text: str, schedule: tuple[tuple[int, int], ...]) -> None:
    assert _capacity(text) == schedule
