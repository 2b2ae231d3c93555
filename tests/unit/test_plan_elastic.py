"""An elastic job's next world size: shrink to the placed workers after a bounded wait, never below minReplicas,
grow back at the next checkpoint when room returns, at most once per resize interval; status.scale follows."""

from datetime import datetime, timedelta
from typing import Any

import pytest
from tests.support.builders import T0, make_job, pod, seen

from trainingjob.children.naming import Replica
from trainingjob.model import WorkerScale
from trainingjob.plan.elastic import (
    Capacity,
    Resize,
    ScaleReason,
    Sizes,
    WorldSize,
    capacity_of,
    next_world_size,
    scale_status,
)

pytestmark = pytest.mark.fast

WAIT, INTERVAL = 120.0, 600.0


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def decide(sizes: Sizes, capacity: Capacity, now: float, last_resize: float | None = None) -> WorldSize:
    resized = at(last_resize) if last_resize is not None else None
    return next_world_size(sizes, capacity, last_resize=resized, now=at(now), wait=WAIT, interval=INTERVAL)


ELASTIC, FULL_GANG = Sizes(desired=4, fewest=2, current=4), Capacity(placed=4, unschedulable=0)
LOST_ONE = Capacity(placed=3, unschedulable=1, unschedulable_since=at(0))
SHRUNK = Sizes(desired=4, fewest=2, current=2)


@pytest.mark.parametrize(
    ("sizes", "capacity", "now", "last_resize", "expected"),
    [
        pytest.param(ELASTIC, FULL_GANG, 0, None, (Resize.STAY, 4, ScaleReason.ALL_WORKERS, None), id="all-placed"),
        pytest.param(
            Sizes(desired=4, fewest=4, current=4), LOST_ONE, 10_000, None,
            (Resize.STAY, 4, ScaleReason.NOT_ELASTIC, None), id="not-elastic-waits-as-before",
        ),
        pytest.param(
            ELASTIC, LOST_ONE, WAIT - 1, None, (Resize.STAY, 4, ScaleReason.WAITING, at(WAIT)),
            id="within-the-wait-it-waits-and-says-until-when",
        ),
        pytest.param(
            ELASTIC, LOST_ONE, WAIT, None, (Resize.SHRINK, 3, ScaleReason.CAPACITY_LOST, None),
            id="past-the-wait-it-shrinks-to-the-placed",
        ),
        pytest.param(
            ELASTIC, LOST_ONE, WAIT, WAIT - 1, (Resize.SHRINK, 3, ScaleReason.CAPACITY_LOST, None),
            id="a-shrink-is-not-rate-limited",
        ),
        pytest.param(
            ELASTIC, Capacity(placed=1, unschedulable=3, unschedulable_since=at(0)), WAIT * 10, None,
            (Resize.STAY, 4, ScaleReason.BELOW_MIN, None), id="fewer-placed-than-min-replicas-waits-for-room",
        ),
        pytest.param(
            ELASTIC, Capacity(placed=2, unschedulable=2, unschedulable_since=at(0)), WAIT, None,
            (Resize.SHRINK, 2, ScaleReason.CAPACITY_LOST, None), id="down-to-exactly-min-replicas",
        ),
        pytest.param(
            SHRUNK, Capacity(placed=1, unschedulable=1, unschedulable_since=at(0)), WAIT, None,
            (Resize.STAY, 2, ScaleReason.BELOW_MIN, None), id="a-shrunk-job-losing-more-below-min-waits",
        ),
        pytest.param(
            Sizes(desired=4, fewest=1, current=2), Capacity(placed=1, unschedulable=1, unschedulable_since=at(5)),
            WAIT + 5, None, (Resize.SHRINK, 1, ScaleReason.CAPACITY_LOST, None), id="a-shrunk-job-shrinks-again",
        ),
        pytest.param(
            SHRUNK, Capacity(placed=2, unschedulable=0), 10_000, 0,
            (Resize.STAY, 2, ScaleReason.CAPACITY_LOST, None), id="smaller-and-no-room-stays",
        ),
        pytest.param(
            SHRUNK, Capacity(placed=2, unschedulable=0, spare=2), INTERVAL, 0,
            (Resize.GROW, 4, ScaleReason.CAPACITY_RETURNED, None), id="room-returned-grows-back",
        ),
        pytest.param(
            SHRUNK, Capacity(placed=2, unschedulable=0, spare=1), INTERVAL, 0,
            (Resize.GROW, 3, ScaleReason.CAPACITY_RETURNED, None), id="grows-by-what-fits",
        ),
        pytest.param(
            SHRUNK, Capacity(placed=2, unschedulable=0, spare=8), INTERVAL, 0,
            (Resize.GROW, 4, ScaleReason.CAPACITY_RETURNED, None), id="never-beyond-replicas",
        ),
        pytest.param(
            SHRUNK, Capacity(placed=2, unschedulable=0, spare=2), INTERVAL - 1, 0,
            (Resize.STAY, 2, ScaleReason.RATE_LIMITED, at(INTERVAL)), id="growth-waits-out-the-interval",
        ),
        pytest.param(
            SHRUNK, Capacity(placed=2, unschedulable=0, spare=2), 0, None,
            (Resize.GROW, 4, ScaleReason.CAPACITY_RETURNED, None), id="no-resize-yet-no-interval",
        ),
        pytest.param(
            ELASTIC, Capacity(placed=4, unschedulable=0, spare=3), 0, None,
            (Resize.STAY, 4, ScaleReason.ALL_WORKERS, None), id="a-full-job-ignores-spare-room",
        ),
    ],
)  # fmt: skip
def test_next_world_size(
    sizes: Sizes,
    capacity: Capacity,
    now: float,
    last_resize: float | None,
    expected: tuple[Resize, int, ScaleReason, datetime | None],
) -> None:
    decision = decide(sizes, capacity, now, last_resize)
    assert (decision.action, decision.workers, decision.reason, decision.recheck_at) == expected
    assert decision.message.startswith(f"{sizes.current} of") or "unschedulable" in decision.message


def test_the_message_says_how_long_it_waits_and_since_when() -> None:
    message = decide(ELASTIC, LOST_ONE, 30).message
    assert "1 of 4 workers unschedulable since 2026-01-01T00:00:00+00:00" in message and "120s" in message


def scale(current: int, since: float, last_resize: float | None = None) -> WorkerScale:
    return WorkerScale(
        current=current,
        desired=4,
        workers=f"{current}/4",
        reason="AllWorkers",
        since=at(since),
        last_resize_time=at(last_resize) if last_resize is not None else None,
    )


STAYING = WorldSize(Resize.STAY, 2, ScaleReason.CAPACITY_LOST, "2 of 4 workers: no room for more")


@pytest.mark.parametrize(
    ("previous", "current", "expected"),
    [
        pytest.param(None, 4, (4, "4/4", at(50), None), id="first-record-is-no-resize"),
        pytest.param(scale(4, 0), 4, (4, "4/4", at(0), None), id="same-size-keeps-since"),
        pytest.param(scale(4, 0), 2, (2, "2/4", at(50), at(50)), id="a-shrink-moves-since-and-is-a-resize"),
        pytest.param(scale(2, 10, 10), 2, (2, "2/4", at(10), at(10)), id="staying-small-keeps-both"),
        pytest.param(scale(2, 10, 10), 4, (4, "4/4", at(50), at(50)), id="growing-back-is-a-resize"),
    ],
)
def test_scale_status(
    previous: WorkerScale | None, current: int, expected: tuple[int, str, datetime, datetime | None]
) -> None:
    status = scale_status(previous, Sizes(desired=4, fewest=2, current=current), STAYING, at(50))
    assert (status.current, status.workers, status.since, status.last_resize_time) == expected
    assert (status.reason, status.message) == ("CapacityLost", STAYING.message)


def unschedulable(index: int, since: float | None, created: float = 0) -> dict[str, Any]:
    """A pending worker pod the scheduler cannot place, saying so since `since` (None: no transition time)."""
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes fit"}
    if since is not None:
        condition["lastTransitionTime"] = at(since).isoformat()
    return pod(make_job(), Replica("worker", index), 1, "Pending", created=at(created), conditions=[condition])


def placed(index: int, role: str = "worker", **fields: Any) -> dict[str, Any]:
    return pod(make_job(), Replica(role, index), 1, node=f"node-{index}", **fields)


@pytest.mark.parametrize(
    ("pods", "expected"),
    [
        pytest.param([placed(0), placed(1)], Capacity(placed=2, unschedulable=0), id="all-placed"),
        pytest.param(
            [placed(0), unschedulable(1, since=30), unschedulable(2, since=10)],
            Capacity(placed=1, unschedulable=2, unschedulable_since=at(10)),
            id="the-earliest-unschedulable-counts",
        ),
        pytest.param(
            [unschedulable(0, since=None, created=5)],
            Capacity(placed=0, unschedulable=1, unschedulable_since=at(5)),
            id="no-transition-time-its-creation",
        ),
        pytest.param(
            [placed(0, role="ps"), placed(1), placed(2, deleting=at(1)), placed(3, phase="Failed", exit_code=1)],
            Capacity(placed=1, unschedulable=0),
            id="servers-going-and-ended-pods-are-not-counted",
        ),
        pytest.param(
            [pod(make_job(), Replica("worker", 0), 1, "Pending")],
            Capacity(placed=0, unschedulable=0),
            id="pending-not-yet-judged-is-neither",
        ),
    ],
)
def test_capacity_of_the_attempts_worker_pods(pods: list[dict[str, Any]], expected: Capacity) -> None:
    assert capacity_of(seen(pods).pods) == expected
