"""Each cause's Event at most once a minute (runtime/announced.py): a cause that comes back after another is not said
again within the minute, a new failure or a changed spec is a new cause, and the memory stays bounded."""

from datetime import timedelta
from typing import Any

import pytest
from tests.support.builders import T0, job_manifest
from tests.support.fake_cluster import FakeCluster

from trainingjob.plan import Event
from trainingjob.runtime import announced as announced_module
from trainingjob.runtime.announced import REPEAT_INTERVAL, Announced
from trainingjob.runtime.cached import CachedCluster, NotLeading
from trainingjob.runtime.memory import Stores

pytestmark = pytest.mark.fast
SECRET = Event("Warning", "SecretCreateRefused", "Creating Secret job-key was refused (403): exceeded quota")
POLICY = Event("Warning", "NetworkPolicyCreateRefused", "Creating NetworkPolicy job was refused (403): denied")


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> Any:
        return self.now


def _job(uid: str = "u1", stalled: int = 0, generation: int = 1) -> dict[str, Any]:
    job = job_manifest("job")
    job["metadata"] |= {"uid": uid, "generation": generation}
    job["status"] = {"restarts": {"failed": 0, "stalled": stalled}}
    return job


@pytest.mark.parametrize(
    ("later", "job", "event", "said"),
    [
        pytest.param(timedelta(seconds=5), _job(), SECRET, False, id="same-cause-within-a-minute"),
        pytest.param(REPEAT_INTERVAL - timedelta(seconds=1), _job(), SECRET, False, id="just-inside-the-minute"),
        pytest.param(REPEAT_INTERVAL, _job(), SECRET, True, id="a-minute-later"),
        pytest.param(timedelta(seconds=5), _job(), POLICY, True, id="another-cause"),
        pytest.param(timedelta(seconds=5), _job(uid="u2"), SECRET, True, id="another-job-of-the-name"),
        pytest.param(timedelta(seconds=5), _job(stalled=1), SECRET, True, id="a-failure-counted-since"),
        pytest.param(timedelta(seconds=5), _job(generation=2), SECRET, True, id="the-spec-changed-since"),
        pytest.param(timedelta(seconds=-5), _job(), SECRET, True, id="the-clock-went-back"),
    ],
)
def test_a_cause_is_said_once_a_minute(later: timedelta, job: dict[str, Any], event: Event, said: bool) -> None:
    clock = Clock()
    announced = Announced(clock)
    assert announced.fresh(_job(), [SECRET]) == [SECRET]
    clock.now += later
    assert announced.fresh(job, [event]) == ([event] if said else [])


def test_a_cause_that_comes_back_after_another_is_not_said_again() -> None:
    """A quota on Secrets, then on NetworkPolicies, then on Secrets again, 16 s apart: three turns, two Events."""
    clock = Clock()
    announced = Announced(clock)
    said = []
    for event in (SECRET, POLICY, SECRET, POLICY):
        said += announced.fresh(_job(), [event])
        clock.now += timedelta(seconds=16)
    assert said == [SECRET, POLICY]


def test_the_memory_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(announced_module, "MOST_CAUSES", 3)
    announced = Announced(Clock())
    for uid in ("a", "b", "c", "d"):
        announced.fresh(_job(uid=uid), [SECRET])
    assert len(announced.said) == 3
    assert announced.fresh(_job(uid="a"), [SECRET]) == [SECRET]  # the oldest was forgotten
    assert announced.fresh(_job(uid="d"), [SECRET]) == []


def test_the_cached_cluster_writes_a_repeat_once() -> None:
    """Through the operator's write path: the second pass's Event of the same cause reaches no apiserver."""
    clock = Clock()
    cluster = FakeCluster(clock=clock)
    cached = CachedCluster(cluster, Stores(), announced=Announced(clock))
    cached.emit(_job(), [SECRET])
    clock.now += timedelta(seconds=10)
    cached.emit(_job(), [SECRET, POLICY])
    assert [e for _, e in cluster.events] == [SECRET, POLICY]


def test_an_event_a_fenced_process_could_not_write_is_not_remembered() -> None:
    clock = Clock()
    leading = False
    cluster = FakeCluster(clock=clock)
    announced = Announced(clock)
    cached = CachedCluster(cluster, Stores(), announced=announced, may_write=lambda: leading)
    with pytest.raises(NotLeading):
        cached.emit(_job(), [SECRET])
    leading = True
    cached.emit(_job(), [SECRET])
    assert [e for _, e in cluster.events] == [SECRET]
