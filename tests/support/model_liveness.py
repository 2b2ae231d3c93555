"""The model-based test's checks over time and over what a reconcile read (issue 32): a job makes progress once the
cluster is quiet, a parameter-server job replaces a missing worker within its backoff, no Event is written more
than once a minute for the same cause, and no write reaches an object other than the one the reconcile read."""

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from tests.support.fake_cluster import FakeCluster
from tests.support.fake_faults import foreign_gated
from tests.support.job_status import job_status
from tests.support.model_elastic import wanted_workers

from trainingjob.children.naming import CONTAINER_NAME
from trainingjob.children.observe import PodPhase, controller_uid, pod_state
from trainingjob.model import Phase, PodOutcome

Manifest = dict[str, Any]
EVENT_INTERVAL = timedelta(minutes=1)
# The quiet period: the clock moves on by these steps (about 75 minutes in all, past every deadline the random
# jobs have), the operator reconciling after each, until the job has settled (not before the first QUIET_AT_LEAST
# steps, so that what it repeats while it waits is seen).
QUIET_STEPS = (1, 2, 5, 10, 20, 30, 45, 45, 60, 120, 300, 600, 1200, 2000)
QUIET_AT_LEAST = 8


def check_actions_on_read(acted: Sequence[tuple[str, str, str]], job_uid: str, pods: list[Manifest]) -> None:
    """Every delete, ungate and order of a reconcile reached the object it read (or one it created, or none): never
    a namesake that replaced it since (a job re-created under the same name, a replacement pod)."""
    known = {str(p["metadata"]["uid"]) for p in pods}
    for what, name, uid in acted:
        if what == "create":
            known.add(uid)
        elif what == "delete job":
            assert uid in ("", job_uid), f"deleted job {name} ({uid}), though it read {job_uid}"
        else:
            assert uid in ("", *known), f"{what} reached pod {name} ({uid}), which the reconcile never read"


def check_event_rate(
    cluster: FakeCluster, start: int, exempt: frozenset[str] = frozenset(), cut_off: frozenset[int] = frozenset()
) -> int:
    """No Event for the same cause (the same job, reason and message, no failure counted or spec changed since) within
    a minute of the last the same operator process wrote (but for the reasons exempt, and after one written by a pass
    an error cut off: what it announced may not have happened, and the next pass does it again); returns how many
    were checked. Each process remembers what it said (runtime/announced.py): one started since may say it again."""
    last: dict[tuple[str, str, str, str, str], datetime] = {}
    logged = zip(cluster.events, cluster.event_log, strict=True)
    for index, ((job, event), (when, uid, restarts, emitter)) in enumerate(logged):
        key = (emitter, uid, event.reason, event.message, restarts)
        before = last.get(key)
        if event.reason in exempt or index in cut_off:
            last.pop(key, None)
            continue
        if index >= start and before is not None and timedelta(0) <= when - before < EVENT_INTERVAL:
            raise AssertionError(f"Event {event.reason} for {job} again after {(when - before).total_seconds()} s")
        last[key] = when
    return len(cluster.events)


def check_stall_on_own_clock(
    before: Manifest, after: Manifest, reported_at: dict[str, datetime | None], now: datetime
) -> None:
    """A job is restarted as Stalled only when rank 0's report has not changed for progressDeadlineSeconds on the
    operator's clock, whatever the clock of rank 0's node says."""
    b, a = job_status(before), job_status(after)
    if a.restarts.stalled <= b.restarts.stalled:
        return
    limit = timedelta(seconds=(before["spec"].get("runPolicy") or {})["progressDeadlineSeconds"])
    changed = reported_at.get(f"{before['metadata']['name']}-worker-0-{b.attempt}")
    assert changed is None or changed + limit <= now, f"stalled {(now - changed).total_seconds()} s after a report"


def check_queue_time_not_startup(after: Manifest, pods: list[Manifest]) -> None:
    """A job is not failed for its startup deadline because of a pod a queue controller still gates (Kueue has not
    admitted it): time in the queue is not startup time (a creation refused meanwhile still counts)."""
    status = job_status(after)
    failed = next((c for c in status.conditions if c.type == "Failed" and c.status == "True"), None)
    if failed is None or failed.reason != "StartupDeadlineExceeded":
        return
    queued = [p["metadata"]["name"] for p in pods if foreign_gated(p) and controller_uid(p) == after["metadata"]["uid"]]
    culprit = status.last_failure.pod if status.last_failure else None
    assert culprit not in queued, f"failed for its startup deadline on {culprit}, which Kueue still held"


def _slots(job: Manifest, room: int) -> set[tuple[str, int]]:
    spec = job["spec"]
    workers = {("worker", i) for i in range(wanted_workers(job, room))}
    servers = {("ps", i) for i in range(int((spec.get("parameterServers") or {}).get("replicas", 0)))}
    return workers | servers


def unsettled(cluster: FakeCluster, namespace: str, name: str) -> str | None:
    """None when the job has settled: gone, finished, suspended as its spec asks, running every replica of its
    current attempt, or queued (a queue controller gates its pods); otherwise how it stands."""
    job = cluster.jobs.get((namespace, name))
    if job is None:
        return None
    status = job_status(job)
    suspend = bool((job["spec"].get("runPolicy") or {}).get("suspend"))
    if status.phase.is_terminal or (status.phase == Phase.SUSPENDED and suspend):
        return None
    states = [
        s
        for p in cluster.pods.values()
        if controller_uid(p) == job["metadata"]["uid"] and (s := pod_state(p, CONTAINER_NAME)) is not None
    ]
    up = {
        (s.replica.role, s.replica.index)
        for s in states
        if s.attempt == status.current_pods_attempt and s.phase == PodPhase.RUNNING and not s.deleting
    }
    service = cluster.services.get((namespace, name))
    served = service is not None and controller_uid(service) == job["metadata"]["uid"]
    if status.phase == Phase.RUNNING and not suspend and _slots(job, cluster.room) <= up and served:
        return None
    queued = [p for p in cluster.pods.values() if controller_uid(p) == job["metadata"]["uid"] and foreign_gated(p)]
    if queued and not suspend:
        return None  # waiting for a queue to admit it: a wait that is not the operator's to end
    said = [f"{c.type}={c.status} {c.reason}: {c.message}" for c in status.conditions if c.status == "False"]
    return f"phase {status.phase}, suspend {suspend}, replicas up {sorted(up)}, Service {served}; {said}"


@dataclass
class MissingWorkers:
    """When each parameter-server worker slot was first seen without a pod after a reconcile that saw it so:
    (job UID, index, attempt) -> time."""

    since: dict[tuple[str, int, int], datetime] = field(default_factory=dict)

    def check(self, cluster: FakeCluster, job: Manifest, now: datetime, backoff: tuple[float, float]) -> None:
        """After a caught-up, uninterrupted reconcile of a Running parameter-server job with nothing refused: a worker
        slot missing for longer than its own backoff (base doubled for each of its failures counted in this attempt
        before the last, or for each refusal by a node in a row, at most max: a backoff other slots' failures do not
        grow) has a pod again."""
        status, uid = job_status(job), str(job["metadata"]["uid"])
        if job["spec"].get("mode") != "ParameterServer" or status.phase != Phase.RUNNING:
            return
        present = {
            (s.replica.role, s.replica.index)
            for p in cluster.pods.values()
            if controller_uid(p) == uid
            and (s := pod_state(p, CONTAINER_NAME)) is not None
            and s.attempt == status.current_pods_attempt
        }
        for role, index in sorted(_slots(job, 0) - present):  # PS: never elastic
            if role != "worker":
                continue
            key = (uid, index, status.current_pods_attempt)
            first = self.since.setdefault(key, now)
            late = (now - first).total_seconds()
            name = f"{job['metadata']['name']}-worker-{index}-{status.current_pods_attempt}"
            failures = sum(t.name == name and t.outcome == PodOutcome.FAILED for t in status.tracked_pods)
            refused = next((r.refused.count for r in status.replacements if r.pod == name and r.refused), 0)
            failures = max(failures, refused)  # each refusal by a node in a row doubles the slot's delay too
            limit = min(backoff[0] * 2 ** max(failures - 1, 0), backoff[1]) + 1
            assert late <= limit, (
                f"worker {index} of {job['metadata']['name']} missing for {late:.0f} s (its backoff {limit - 1:.0f} s)"
            )
        for key in [k for k in self.since if k[0] == uid and ("worker", k[1]) in present]:
            del self.since[key]

    def forget(self, uid: str) -> None:
        """A pass that could not replace workers (refusals, errors, a stale read): the wait starts again."""
        for key in [k for k in self.since if k[0] == uid]:
            del self.since[key]
