"""Outcome.deciding_seconds, which the controller's rest after a reconcile follows: what the pass takes to read its
memory, observe and plan, and never its waits on the network (rank 0's progress, a failure's log, an agent), which
are the pods' slowness, not the cost of deciding. Measured on a stopwatch the test turns by hand."""

from typing import Any

import pytest
from tests.support.builders import SETTINGS, T0, job_manifest
from tests.support.fake_cluster import FakeCluster

from trainingjob.reconcile import job as reconcile_job
from trainingjob.reconcile.job import reconcile

pytestmark = pytest.mark.fast
NS, NETWORK, MEMORY = "ns", 100.0, 1.0


class Stopwatch:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class TimedCluster(FakeCluster):
    """Each read over the network takes NETWORK seconds on the stopwatch, each list from memory MEMORY seconds."""

    def __init__(self, watch: Stopwatch) -> None:
        super().__init__(clock=lambda: T0)
        self.watch = watch

    def list_pods(self, namespace: str, job: str) -> list[dict[str, Any]]:
        self.watch.now += MEMORY
        return super().list_pods(namespace, job)

    def progress(self, pod: dict[str, Any]) -> Any:
        self.watch.now += NETWORK
        return super().progress(pod)

    def log_tail(self, namespace: str, pod: str, lines: int) -> str:
        self.watch.now += NETWORK
        return super().log_tail(namespace, pod, lines)


def test_deciding_counts_the_reads_from_memory_and_not_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    watch = Stopwatch()
    monkeypatch.setattr(reconcile_job, "stopwatch", watch)
    cluster = TimedCluster(watch)
    cluster.submit(job_manifest(namespace=NS, workers=2))
    reconcile(cluster, NS, "job", now=T0, settings=SETTINGS)
    for key in list(cluster.pods):
        cluster.run(*key)
    cluster.finish(NS, "job-worker-1-1", exit_code=1)  # a failure to record: its log is read
    started = watch.now
    outcome = reconcile(cluster, NS, "job", now=T0, settings=SETTINGS)
    assert watch.now - started >= 2 * NETWORK, "the pass read rank 0's progress and the failure's log"
    assert outcome.deciding_seconds == MEMORY
