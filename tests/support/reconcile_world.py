"""One job reconciled by the real reconcile and planner against the in-memory cluster, on a clock the test moves:
what the restart-in-place tests (tests/unit/test_in_place.py, test_worker_in_place.py) drive."""

from datetime import timedelta
from typing import Any

from tests.support.builders import SETTINGS, T0
from tests.support.fake_cluster import Crash, FakeCluster

from trainingjob.plan import Settings
from trainingjob.reconcile.job import reconcile

NS = "ns"


class ReconcileWorld:
    def __init__(self, settings: Settings = SETTINGS) -> None:
        self.now = T0
        self.cluster = FakeCluster(clock=lambda: self.now)
        self.settings = settings

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def reconcile(self, crash_after: int | None = None) -> bool:
        """One pass of job "job"; False when the cluster crashed it after `crash_after` operations."""
        self.cluster.operations_left = crash_after
        try:
            reconcile(self.cluster, NS, "job", now=self.now, settings=self.settings)
        except Crash:
            return False
        finally:
            self.cluster.operations_left = None
        return True

    def trainer_fails(self) -> None:
        """A trainer fails inside its healthy pod, as its agent tells it (each test's own)."""
        raise NotImplementedError

    def told_despite_a_crash(self, agent: str, crash_after: int, backoff: float) -> None:
        """A trainer fails and its restart is recorded; the pass after the backoff dies after `crash_after`
        operations; passes go on until `agent`'s agent was told to run the next attempt (or incarnation)."""
        self.trainer_fails()
        self.reconcile()
        self.advance(backoff + 0.1)
        self.reconcile(crash_after=crash_after)
        while self.cluster.gangs[agent].attempt < 2:
            self.advance(0.5)
            self.reconcile()

    @property
    def status(self) -> Any:
        return self.cluster.job_status(NS, "job")

    @property
    def pods(self) -> list[str]:
        return sorted(name for _, name in self.cluster.pods)

    def reasons(self) -> list[str]:
        return [event.reason for _, event in self.cluster.events]
