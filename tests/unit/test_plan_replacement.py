"""Parameter-server workers replaced alone, each on its own backoff: disruptions that come faster than the job's
backoff never starve the replacements of the others (a PS job below its replica count replaces a worker within its
backoff), disruptions never grow a worker's delay, and the job's own failures of one worker grow only its own."""

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pytest
from tests.support.builders import SETTINGS, at, created_names, pod, running, seen

from trainingjob.children.naming import Replica
from trainingjob.model import Phase, TrainingJob
from trainingjob.plan import plan

pytestmark = pytest.mark.fast

BASE = SETTINGS.backoff_base_seconds
EVICTED = {
    "reason": "Evicted",
    "message": "The node was low on resource: memory. ",
    "conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet"}],
}
ENDINGS: dict[str, dict[str, Any]] = {
    "evicted": EVICTED,
    "preempted": {"exit_code": 79},
    "refused-by-node": {"reason": "OutOfnvidia.com/gpu", "message": "Pod was rejected", "node": "spot-3"},
    "crashed": {"exit_code": 1},
}


@dataclass
class PsCluster:
    """A parameter-server job and its pods as the planner sees them: pods it creates run at once, pods it deletes go
    at once, and the test ends workers as it likes."""

    job: TrainingJob
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    created_at: dict[str, list[datetime]] = field(default_factory=dict)
    made: int = 0

    def __post_init__(self) -> None:
        for name, manifest in self._running().items():
            self.pods[name] = manifest

    def _running(self) -> dict[str, dict[str, Any]]:
        workers = [Replica("worker", i) for i in range(self.job.spec.workers.replicas)]
        return {r.pod_name("job", 1): pod(self.job, r, 1) for r in [Replica("ps", 0), *workers]}

    def end(self, index: int, ending: dict[str, Any], now: datetime) -> None:
        name = Replica("worker", index).pod_name("job", 1)
        self.made += 1
        uid = self.pods[name]["metadata"]["uid"]
        self.pods[name] = pod(self.job, Replica("worker", index), 1, "Failed", uid=uid, created=now, **ending)

    def reconcile(self, now: datetime) -> None:
        result = plan(self.job, seen(list(self.pods.values())), now, SETTINGS)
        self.job = self.job.model_copy(update={"status": result.status})
        for name in result.delete:
            self.pods.pop(name, None)
        for name in created_names(result):
            self.made += 1
            index = int(name.split("-")[2])
            self.pods[name] = pod(self.job, Replica("worker", index), 1, uid=f"uid-{self.made}", created=now)
            self.created_at.setdefault(name, []).append(now)

    def running_workers(self) -> int:
        return sum(
            1 for p in self.pods.values() if "worker" in p["metadata"]["name"] and p["status"]["phase"] == "Running"
        )


def ps_cluster(workers: int, **policy: Any) -> PsCluster:
    return PsCluster(running(mode="ParameterServer", workers=workers, servers=1, **policy))


@pytest.mark.parametrize("ending", ["evicted", "preempted", "refused-by-node"])
def test_disruptions_every_few_seconds_never_starve_the_replacements(ending: str) -> None:
    """A 16-worker job on spot nodes loses a worker every 4 s for 10 minutes: each is replaced within the base backoff
    of its own loss, and the job never drops below the workers lost within one backoff."""
    cluster = ps_cluster(16, disruptionLimit=1000)
    lost: dict[str, list[float]] = {}
    for second in range(1, 700):
        if second % 4 == 0 and second < 600:
            index = (second // 4 * 5) % 16  # a different worker each time, around the job
            cluster.end(index, ENDINGS[ending], at(second))
            lost.setdefault(Replica("worker", index).pod_name("job", 1), []).append(second)
        cluster.reconcile(at(second))
        assert cluster.job.status and cluster.job.status.phase == Phase.RUNNING, second
        assert cluster.running_workers() >= 16 - BASE / 4 - 1, second
    for name, seconds in lost.items():
        replaced = [(t - at(0)).total_seconds() for t in cluster.created_at.get(name, [])]
        assert len(replaced) == len(seconds), name
        assert all(0 < r - s <= BASE + 1 for s, r in zip(seconds, replaced, strict=True)), (name, seconds, replaced)
    assert cluster.running_workers() == 16 and cluster.job.status and cluster.job.status.restarts.retryable == 0


@pytest.mark.parametrize(
    ("endings", "delay"),
    [
        pytest.param(["crashed"], BASE, id="first-crash-base"),
        pytest.param(["crashed", "crashed"], 2 * BASE, id="second-crash-doubles"),
        pytest.param(["crashed", "crashed", "crashed"], 4 * BASE, id="third-crash-doubles-again"),
        pytest.param(["evicted", "evicted", "evicted"], BASE, id="disruptions-do-not-grow"),
        pytest.param(["crashed", "crashed", "evicted"], BASE, id="a-disruption-after-crashes-waits-the-base"),
        pytest.param(["evicted", "evicted", "crashed"], BASE, id="disruptions-before-do-not-count"),
    ],
)
def test_a_workers_delay_grows_with_its_own_failures_of_the_jobs_only(endings: list[str], delay: float) -> None:
    """Worker 1 ends in each of `endings` in turn (each replacement up before the next); the last one's replacement
    waits `delay`."""
    cluster = ps_cluster(3, backoffLimit=10)
    for now in range(1000, 1000 * len(endings), 1000):
        cluster.end(1, ENDINGS[endings[now // 1000 - 1]], at(now))
        cluster.reconcile(at(now))
        cluster.reconcile(at(now + SETTINGS.backoff_max_seconds))
    now = 1000 * len(endings)
    cluster.end(1, ENDINGS[endings[-1]], at(now))
    cluster.reconcile(at(now))
    cluster.reconcile(at(now + delay - 0.5))
    assert "job-worker-1-1" not in cluster.pods, f"replaced {delay - 0.5} s after a {endings[-1]}"
    cluster.reconcile(at(now + delay))
    assert cluster.created_at["job-worker-1-1"] == [
        at(1000 * n + SETTINGS.backoff_max_seconds) for n in range(1, len(endings))
    ] + [at(now + delay)]


def test_one_workers_failure_does_not_delay_anothers_replacement() -> None:
    """Worker 0 crashed three times (its delay is 40 s); worker 2, evicted later, is back after the base."""
    cluster = ps_cluster(3, backoffLimit=10)
    for now in (1, 50, 120):
        cluster.end(0, ENDINGS["crashed"], at(now))
        cluster.reconcile(at(now))
        cluster.reconcile(at(now + 40))
    cluster.end(0, ENDINGS["crashed"], at(200))
    cluster.reconcile(at(200))
    cluster.end(2, EVICTED, at(201))
    cluster.reconcile(at(201))
    cluster.reconcile(at(201 + BASE))
    assert cluster.created_at["job-worker-2-1"] == [at(201 + BASE)] and "job-worker-0-1" not in cluster.pods
    cluster.reconcile(at(200 + 8 * BASE))
    assert cluster.created_at["job-worker-0-1"][-1] == at(200 + 8 * BASE)


def test_the_running_condition_says_when_a_missing_worker_is_replaced() -> None:
    cluster = ps_cluster(3)
    cluster.end(2, EVICTED, at(1))
    cluster.reconcile(at(1))
    cluster.reconcile(at(2))
    running = next(c for c in cluster.job.status.conditions if c.type == "Running") if cluster.job.status else None
    assert running and running.status == "True" and running.reason == "ReplacingPods"
    assert "job-worker-2-1: replaced alone, not before 2026-01-01T00:00:11Z (its own backoff)" in running.message


def test_a_whole_attempt_restart_forgets_the_workers_backoffs() -> None:
    cluster = ps_cluster(2, backoffLimit=10)
    cluster.end(1, ENDINGS["crashed"], at(1))
    cluster.reconcile(at(1))
    assert cluster.job.status and [r.pod for r in cluster.job.status.replacements] == ["job-worker-1-1"]
    ps = Replica("ps", 0).pod_name("job", 1)
    cluster.pods[ps] = pod(cluster.job, Replica("ps", 0), 1, "Failed", exit_code=1)
    cluster.reconcile(at(2))
    assert cluster.job.status and cluster.job.status.attempt == 2 and cluster.job.status.replacements == []
