"""reconcile() against the in-memory cluster: the order of writes and actions, what survives an operator killed
at any point, refusals, namesakes, and jobs deleted while they are reconciled."""

from datetime import datetime, timedelta
from typing import Any

import pytest
from tests.support.builders import SETTINGS, T0, job_manifest, tracked_records
from tests.support.fake_cluster import Crash, FakeCluster

from trainingjob.children.naming import TRACKING_FINALIZER, TRACKING_GATE
from trainingjob.children.observe import holds_tracking_finalizer
from trainingjob.kube.ports import Conflict
from trainingjob.plan.waves import FIRST_WAVE, Refusal
from trainingjob.reconcile.job import Outcome, decided_on, merge_patch, observed_uids, reconcile

pytestmark = pytest.mark.fast

NS = "ns"


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def cluster(clock: Clock) -> FakeCluster:
    return FakeCluster(clock=clock)


def run(cluster: FakeCluster, clock: Clock, name: str = "job", crash_after: int | None = None) -> Outcome | None:
    cluster.operations_left = crash_after
    try:
        return reconcile(cluster, NS, name, now=clock.now, settings=SETTINGS)
    except Crash:
        return None
    finally:
        cluster.operations_left = None


def pods(cluster: FakeCluster) -> list[str]:
    return sorted(name for _, name in cluster.pods)


def status(cluster: FakeCluster, name: str = "job") -> Any:
    return cluster.job_status(NS, name)


def start(cluster: FakeCluster, clock: Clock, **spec: Any) -> None:
    cluster.submit(job_manifest(namespace=NS, **spec))
    run(cluster, clock)
    for key in list(cluster.pods):
        cluster.run(*key)
    run(cluster, clock)
    assert status(cluster)["phase"] == "Running"


def test_merge_patch_nulls_what_is_gone_at_any_depth() -> None:
    old = {"lastFailure": {"exitCode": 75, "podUid": "a", "reason": "Error"}, "attempt": 1, "gone": 1}
    new = {"lastFailure": {"reason": "Vanished"}, "attempt": 2}
    assert merge_patch(old, new) == {
        "gone": None,
        "lastFailure": {"exitCode": None, "podUid": None, "reason": "Vanished"},
        "attempt": 2,
    }


def test_no_field_of_an_earlier_failure_lingers(cluster: FakeCluster, clock: Clock) -> None:
    start(cluster, clock, runPolicy={"disruptionLimit": 5})
    cluster.finish(NS, "job-worker-1-1", 1)
    run(cluster, clock)
    assert status(cluster)["lastFailure"]["exitCode"] == 1
    cluster.reap_terminating()
    clock.advance(10)
    run(cluster, clock)
    for key in list(cluster.pods):
        cluster.run(*key)
    run(cluster, clock)
    cluster.evict(NS, "job-worker-0-2", reason="DeletionByPodGC")  # its node is lost: no exit code this time
    run(cluster, clock)
    failure = status(cluster)["lastFailure"]
    assert failure["reason"] == "DeletionByPodGC" and "exitCode" not in failure and failure["attempt"] == 2


def test_events_are_recorded_even_when_the_actions_fail(cluster: FakeCluster, clock: Clock) -> None:
    cluster.submit(job_manifest(namespace=NS))
    run(cluster, clock, crash_after=2)  # the status write and the events, then the operator dies while creating
    assert [e.reason for _, e in cluster.events] == ["JobCreated"] and not cluster.pods
    run(cluster, clock)
    assert pods(cluster) == ["job-worker-0-1", "job-worker-1-1"]
    assert status(cluster)["restarts"]["disruption"] == 0 and status(cluster)["attempt"] == 1


def test_a_job_deleted_mid_reconcile_is_done_not_an_error(cluster: FakeCluster, clock: Clock) -> None:
    cluster.submit(job_manifest(namespace=NS))

    class Vanishing(FakeCluster):
        def write_status(self, namespace: str, name: str, resource_version: str, patch: dict[str, Any]) -> str:
            self.jobs.pop((namespace, name), None)
            return super().write_status(namespace, name, resource_version, patch)

    vanishing = Vanishing(clock=clock, jobs=cluster.jobs)
    outcome = reconcile(vanishing, NS, "job", now=clock.now, settings=SETTINGS)
    assert outcome.after is None and not vanishing.pods


def test_a_stale_version_is_a_conflict(cluster: FakeCluster, clock: Clock) -> None:
    cluster.submit(job_manifest(namespace=NS))
    stale = cluster.read_job(NS, "job")
    assert stale is not None
    run(cluster, clock)
    with pytest.raises(Conflict):
        cluster.write_status(NS, "job", stale["metadata"]["resourceVersion"], {"attempt": 9})


@pytest.mark.parametrize("crash_after", range(7), ids=[f"killed-after-{n}-operations" for n in range(7)])
def test_an_operator_killed_while_restarting_the_gang_counts_once_and_never_doubles_a_pod(
    cluster: FakeCluster, clock: Clock, crash_after: int
) -> None:
    start(cluster, clock, workers=3)
    cluster.finish(NS, "job-worker-1-1", 75)
    run(cluster, clock, crash_after=crash_after)
    for _ in range(6):
        clock.advance(5)
        run(cluster, clock)
        cluster.reap_terminating()
    assert status(cluster)["restarts"] == {"retryable": 1, "oom": 0, "disruption": 0, "stalled": 0}
    assert pods(cluster) == ["job-worker-0-2", "job-worker-1-2", "job-worker-2-2"]


def test_a_replacement_evicted_before_the_operator_saw_it_is_counted_by_its_uid(
    cluster: FakeCluster, clock: Clock
) -> None:
    start(cluster, clock, mode="ParameterServer", workers=2, servers=1)
    cluster.finish(NS, "job-worker-1-1", 75)
    run(cluster, clock)
    cluster.reap_terminating()
    clock.advance(10)
    run(cluster, clock)  # creates the replacement and tracks its UID at once
    replacement = cluster.pods[NS, "job-worker-1-1"]["metadata"]["uid"]
    cluster.evict(NS, "job-worker-1-1")
    cluster.reap(NS, "job-worker-1-1")
    run(cluster, clock)
    assert status(cluster)["restarts"]["retryable"] == 1 and status(cluster)["restarts"]["disruption"] == 1
    assert status(cluster)["lastFailure"]["podUid"] == replacement


def test_refusals_surface_once_as_a_condition_and_an_event(cluster: FakeCluster, clock: Clock) -> None:
    message = 'pods "job-worker-0-1" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true'
    cluster.refuse = lambda manifest: Refusal(manifest["metadata"]["name"], 403, message)
    cluster.submit(job_manifest(namespace=NS))
    run(cluster, clock)
    created = next(c for c in status(cluster)["conditions"] if c["type"] == "Created")
    assert (created["status"], created["reason"]) == ("False", "PodCreateRefused") and "PodSecurity" in created[
        "message"
    ]
    for _ in range(5):
        clock.advance(60)
        run(cluster, clock)
    assert [e.reason for _, e in cluster.events].count("PodCreateRefused") == 1 and not cluster.pods
    assert status(cluster)["phase"] == "Pending" and status(cluster)["restarts"]["disruption"] == 0
    cluster.refuse = lambda _: None
    clock.advance(600)
    run(cluster, clock)
    assert pods(cluster) == ["job-worker-0-1", "job-worker-1-1"]


def tracked_names(cluster: FakeCluster) -> set[str]:
    return {t.name for t in tracked_records(status(cluster))}


def gated(cluster: FakeCluster) -> list[str]:
    return sorted(name for (_, name), pod in cluster.pods.items() if pod["spec"].get("schedulingGates"))


def test_a_large_gang_is_written_once_per_pod_and_recorded_in_one_status_write(
    cluster: FakeCluster, clock: Clock
) -> None:
    steps: list[tuple[str, int]] = []
    create, write_status = cluster.create, cluster.write_status

    def creating(namespace: str, manifests: Any) -> Any:
        steps.append(("create", sum(m["kind"] == "Pod" for m in manifests)))
        return create(namespace, manifests)

    def writing(namespace: str, name: str, resource_version: str, patch: Any) -> str:
        steps.append(("status", len(tracked_records(patch))))
        return write_status(namespace, name, resource_version, patch)

    cluster.create, cluster.write_status = creating, writing  # type: ignore[method-assign]
    cluster.submit(job_manifest(namespace=NS, workers=100))
    run(cluster, clock)
    assert FIRST_WAVE == 16 and steps == [
        ("status", 0),  # the plan's: attempt 1, Pending
        ("create", 0),  # the Service, key Secret and NetworkPolicy first, on their own
        ("create", 16),  # then the pods in waves that double, schedulable at once
        ("create", 32),
        ("create", 52),
        ("status", 100),  # what they did, recorded once
    ]
    assert len(cluster.pods) == 100 and len(tracked_names(cluster)) == 100 and not gated(cluster)
    assert all(p["metadata"]["finalizers"] == [TRACKING_FINALIZER] for p in cluster.pods.values())
    assert not [a for a in cluster.acted if a[0] not in ("create",)], "a pod was written twice on the way up"


def test_a_pod_created_again_under_its_name_is_not_released_by_a_stale_decision(
    cluster: FakeCluster, clock: Clock
) -> None:
    """An earlier operator's pods wait at the tracking gate until this one lifts it; if one is deleted and created
    again under its name between the pass's read and its ungate, the namesake stays gated (the UID it names)."""
    cluster.submit(job_manifest(namespace=NS, workers=2))
    run(cluster, clock)  # created and recorded
    for pod in cluster.pods.values():  # as an earlier version of the operator made them: behind the gate
        pod["spec"]["schedulingGates"] = [{"name": TRACKING_GATE}]
    ungate = cluster.ungate

    def raced(namespace: str, pods: Any) -> None:
        manifest = cluster.pods.pop((NS, "job-worker-1-1"))
        manifest["metadata"].pop("uid")
        cluster.add_pod(NS, manifest)  # a namesake, at the gate too
        ungate(namespace, pods)  # decided on the pods before

    cluster.ungate = raced  # type: ignore[method-assign]
    run(cluster, clock)
    assert gated(cluster) == ["job-worker-1-1"]


def test_a_refused_wave_ends_the_creation_and_the_next_pass_creates_the_rest(cluster: FakeCluster) -> None:
    clock = Clock()
    refused = {f"job-worker-{i}-1" for i in range(20, 30)}  # in the second wave (16-47)
    cluster.refuse = lambda m: (
        Refusal(m["metadata"]["name"], 403, "exceeded quota") if m["metadata"]["name"] in refused else None
    )
    cluster.submit(job_manifest(namespace=NS, workers=100))
    run(cluster, clock)
    assert len(cluster.pods) == 38 and tracked_names(cluster) == {name for _, name in cluster.pods}
    assert not gated(cluster)  # the created ones run meanwhile: the tracking gate is not a gang gate
    created = next(c for c in status(cluster)["conditions"] if c["type"] == "Created")
    assert created["reason"] == "PodCreateRefused" and "job-worker-20-1" in created["message"]
    cluster.refuse = lambda _: None
    clock.advance(600)
    run(cluster, clock)
    assert len(cluster.pods) == 100 and len(tracked_names(cluster)) == 100 and not gated(cluster)


def test_a_job_changed_during_the_creation_is_recorded_by_the_next_pass(cluster: FakeCluster) -> None:
    clock = Clock()
    create = cluster.create

    def edited_meanwhile(namespace: str, manifests: Any) -> Any:
        job = cluster.jobs[(NS, "job")]
        job["metadata"]["resourceVersion"] = cluster.version()  # someone labels the job
        return create(namespace, manifests)

    cluster.create = edited_meanwhile  # type: ignore[method-assign]
    cluster.submit(job_manifest(namespace=NS, workers=100))
    run(cluster, clock)  # every pod is created; their record conflicts (the pods need none to run)
    assert len(cluster.pods) == 100 and tracked_names(cluster) == set() and not gated(cluster)
    cluster.create = create  # type: ignore[method-assign]
    run(cluster, clock)
    assert len(cluster.pods) == 100 and len(tracked_names(cluster)) == 100


def test_a_job_created_again_under_the_same_name_never_adopts_the_old_pods(cluster: FakeCluster, clock: Clock) -> None:
    start(cluster, clock)
    for key in list(cluster.pods):
        cluster.finish(*key, 0)
    del cluster.jobs[NS, "job"]  # deleted; the garbage collector has not removed its pods yet
    cluster.submit(job_manifest(namespace=NS))
    run(cluster, clock)
    assert status(cluster)["phase"] == "Pending" and all(
        p["status"]["phase"] == "Succeeded" for p in cluster.pods.values()
    )
    cluster.collect_garbage()  # deleted: the tracking finalizer keeps them until the operator lets go of them
    clock.advance(1)
    run(cluster, clock)
    assert not any(holds_tracking_finalizer(p) for p in cluster.pods.values())
    cluster.reap_terminating()
    clock.advance(1)
    run(cluster, clock)
    assert pods(cluster) == ["job-worker-0-1", "job-worker-1-1"]
    assert all(p["status"]["phase"] == "Pending" for p in cluster.pods.values())
    assert status(cluster)["phase"] == "Pending"
    for key in list(cluster.pods):  # the kubelet mounts the job's own key (its first pass sent only the Service)
        cluster.run(*key)
    run(cluster, clock)
    assert status(cluster)["phase"] == "Running"


def test_a_deleted_jobs_pods_are_let_go_of_as_the_garbage_collector_deletes_them(
    cluster: FakeCluster, clock: Clock
) -> None:
    start(cluster, clock)
    assert all(p["metadata"]["finalizers"] == [TRACKING_FINALIZER] for p in cluster.pods.values())
    del cluster.jobs[NS, "job"]
    run(cluster, clock)  # not deleted yet: nothing to let go of
    assert all(holds_tracking_finalizer(p) for p in cluster.pods.values())
    cluster.collect_garbage()
    cluster.reap_terminating()  # the kubelets are done with them: only the finalizer holds them
    assert pods(cluster) == ["job-worker-0-1", "job-worker-1-1"]
    run(cluster, clock)
    assert pods(cluster) == [] and sorted(a[:2] for a in cluster.acted if a[0] == "release") == [
        ("release", "job-worker-0-1"),
        ("release", "job-worker-1-1"),
    ]


def test_a_job_being_deleted_in_the_foreground_lets_go_of_its_pods(cluster: FakeCluster, clock: Clock) -> None:
    start(cluster, clock)
    assert all(holds_tracking_finalizer(p) for p in cluster.pods.values())
    cluster.jobs[NS, "job"]["metadata"]["deletionTimestamp"] = clock.now.isoformat()
    for key in list(cluster.pods):  # the garbage collector deletes the dependents first
        cluster.delete_pod(*key)
    run(cluster, clock)
    assert not any(holds_tracking_finalizer(p) for p in cluster.pods.values())
    cluster.reap_terminating()
    assert pods(cluster) == []


def test_an_invalid_stored_job_fails_once_then_is_cleaned_up_and_deleted(cluster: FakeCluster, clock: Clock) -> None:
    start(cluster, clock, runPolicy={"ttlSecondsAfterFinished": 30, "cleanPodPolicy": "All"})
    cluster.jobs[NS, "job"]["spec"]["workers"]["replicas"] = 0  # what an older CRD let in
    run(cluster, clock)
    assert status(cluster)["phase"] == "Failed"
    assert all(p["metadata"].get("deletionTimestamp") for p in cluster.pods.values())  # cleanPodPolicy All
    assert not any(holds_tracking_finalizer(p) for p in cluster.pods.values())  # and let go of
    failed = next(c for c in status(cluster)["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "InvalidSpec" and "spec.workers.replicas" in failed["message"]
    clock.advance(30)
    run(cluster, clock)
    assert (NS, "job") not in cluster.jobs
    assert [e.reason for _, e in cluster.events].count("InvalidSpec") == 1


def test_a_status_a_newer_operator_wrote_is_salvaged_and_the_job_runs_on(cluster: FakeCluster, clock: Clock) -> None:
    """A rollback: the status has a field this version does not know, and a pod record it refuses. The spec is
    valid, so the job keeps running: what is valid of the status is kept, the pods are recorded again."""
    start(cluster, clock)
    stored = cluster.jobs[NS, "job"]["status"]
    stored["fromTheFuture"] = {"x": 1}
    stored["trackedPods"] = [{"name": "job-worker-0-1", "uid": "u", "seenBy": "a newer operator"}]
    restarts = stored["restarts"]
    clock.advance(1)
    run(cluster, clock)
    after = status(cluster)
    assert after["phase"] == "Running" and after["restarts"] == restarts and "fromTheFuture" not in after
    assert {t.name for t in tracked_records(after)} == {"job-worker-0-1", "job-worker-1-1"}
    assert not [e for _, e in cluster.events if e.reason == "InvalidSpec"]


@pytest.mark.parametrize(
    ("names", "expected"),
    [(("a", "b"), {"a": "uid-a", "b": "uid-b"}), (("a", "gone"), {"a": "uid-a"}), (("no-uid",), {})],
    ids=["observed", "not-observed", "observed-without-uid"],
)
def test_a_delete_names_the_pods_as_observed(names: tuple[str, ...], expected: dict[str, str]) -> None:
    seen = [{"metadata": {"name": n, "uid": f"uid-{n}"}} for n in ("a", "b")] + [{"metadata": {"name": "no-uid"}}]
    assert decided_on(observed_uids(seen), names) == expected
