"""The watch-fed store: newer versions win in whatever order events and the operator's own answers arrive, the
deleted stay deleted, a relist drops what is gone but keeps what was written after it, and every change names
the jobs it touches; and the pod store keeps all that observing a pod reads, and little else."""

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.builders import JOB_UID, T0, make_job, pod
from tests.support.fake_cluster import FakeCluster

from trainingjob.children.naming import CONTAINER_NAME, JOB_LABEL, Replica
from trainingjob.children.observe import essentials, pod_state
from trainingjob.children.progress_report import final_report
from trainingjob.kube.watch import PAGE
from trainingjob.runtime.cached import CachedCluster
from trainingjob.runtime.memory import PACKED_PAGE, Stores, sources, store_informer
from trainingjob.runtime.store import Store, newer
from trainingjob.sweep.trials import SWEEP_LABEL

pytestmark = pytest.mark.fast

Manifest = dict[str, Any]
NS = "ns"


def obj(name: str, version: int, *, uid: str = "", job: str | None = "job", **extra: Any) -> Manifest:
    labels = {JOB_LABEL: job} if job else {}
    metadata = {"namespace": NS, "name": name, "uid": uid or f"uid-{name}", "resourceVersion": str(version)}
    return {"kind": "Pod", "metadata": {**metadata, "labels": labels}, **extra}


def by_label() -> Store:
    return Store(lambda m: (m["metadata"].get("labels") or {}).get(JOB_LABEL))


def versions(store: Store, job: str = "job") -> dict[str, str]:
    return {m["metadata"]["name"]: m["metadata"]["resourceVersion"] for m in store.of_job(NS, job)}


@pytest.mark.parametrize(
    ("version", "than", "expected"),
    [("10", "9", True), ("9", "10", False), ("7", "7", False), ("abc", "abd", True), ("abc", "abc", False)],
    ids=["numbers-grow", "numbers-older", "same", "opaque-differs", "opaque-same"],
)
def test_newer_compares_etcd_revisions_as_numbers(version: str, than: str, expected: bool) -> None:
    assert newer(version, than) is expected


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        ([("apply", "ADDED", 5), ("apply", "MODIFIED", 7)], "7"),
        ([("saw", None, 9), ("apply", "MODIFIED", 8)], "9"),  # the write's answer came before the watch's event
        ([("apply", "MODIFIED", 9), ("saw", None, 8)], "9"),  # a slow answer to an older write
        ([("apply", "ADDED", 5), ("apply", "MODIFIED", 5)], "5"),
    ],
    ids=["events-in-order", "write-then-older-event", "event-then-older-write", "same-version-again"],
)
def test_an_older_version_never_replaces_a_newer_one(steps: list[tuple[str, str | None, int]], expected: str) -> None:
    store = by_label()
    for call, kind, version in steps:
        store.apply(str(kind), obj("p", version)) if call == "apply" else store.saw(obj("p", version))
    assert versions(store) == {"p": expected}


def test_what_was_seen_deleted_stays_deleted_even_if_a_write_answer_arrives_late() -> None:
    store = by_label()
    store.apply("ADDED", obj("p", 5))
    assert store.apply("DELETED", obj("p", 6)) == {(NS, "job")}
    assert store.saw(obj("p", 5)) == set() and store.of_job(NS, "job") == []
    assert store.seen_deleted("uid-p")


def test_a_deletion_of_an_old_object_leaves_its_namesake_alone() -> None:
    """A pod replaced under the same name: the old one's DELETED event must not remove the new one."""
    store = by_label()
    store.apply("ADDED", obj("p", 5, uid="old"))
    store.saw(obj("p", 9, uid="new"))
    store.apply("DELETED", obj("p", 10, uid="old"))
    assert [m["metadata"]["uid"] for m in store.of_job(NS, "job")] == ["new"]


def test_a_relabelled_object_moves_between_jobs_and_both_are_woken() -> None:
    store = by_label()
    store.apply("ADDED", obj("p", 5, job="a"))
    assert store.apply("MODIFIED", obj("p", 6, job="b")) == {(NS, "a"), (NS, "b")}
    assert store.of_job(NS, "a") == [] and versions(store, "b") == {"p": "6"}


def test_a_relist_drops_the_gone_keeps_what_was_written_after_it_and_names_every_changed_job() -> None:
    store = by_label()
    store.replace([obj("kept", 3), obj("gone", 4, job="other"), obj("changed", 5)], "10")
    store.saw(obj("written-later", 12))
    changed = store.replace([obj("kept", 3), obj("changed", 11), obj("new", 11, job="third")], "11")
    assert versions(store) == {"changed": "11", "kept": "3", "written-later": "12"}
    assert changed == {(NS, "job"), (NS, "other"), (NS, "third")}
    assert store.seen_deleted("uid-gone") and store.synced


def test_an_empty_store_is_not_synced_until_a_whole_list_arrives() -> None:
    store = by_label()
    store.apply("ADDED", obj("p", 5))
    assert not store.synced and not store.wait_synced(timeout=0)
    store.replace([], "6")
    assert store.synced and store.wait_synced(timeout=0)


def test_tombstones_are_forgotten_after_their_time() -> None:
    now = [0.0]
    store = Store(lambda m: "job", tombstone_seconds=60, clock=lambda: now[0])
    store.apply("DELETED", obj("p", 5))
    now[0] = 61
    store.apply("DELETED", obj("q", 6))
    assert not store.seen_deleted("uid-p") and store.seen_deleted("uid-q")


def test_managed_fields_are_not_kept() -> None:
    store = by_label()
    store.apply("ADDED", obj("p", 5) | {"metadata": {**obj("p", 5)["metadata"], "managedFields": [{"x": 1}]}})
    assert "managedFields" not in store.of_job(NS, "job")[0]["metadata"]


# -- the pod store keeps what observing reads --------------------------------------------------------------

STATUSES = st.fixed_dictionaries(
    {},
    optional={
        "phase": st.sampled_from(["Pending", "Running", "Succeeded", "Failed", "Unknown"]),
        "reason": st.sampled_from(["Evicted", "OutOfnvidia.com/gpu", ""]),
        "message": st.text(max_size=20),
        "podIP": st.sampled_from(["10.0.0.7", ""]),
        "conditions": st.lists(
            st.fixed_dictionaries(
                {
                    "type": st.sampled_from(["Ready", "PodScheduled", "DisruptionTarget"]),
                    "status": st.sampled_from(["True", "False"]),
                    "reason": st.sampled_from(["Unschedulable", "EvictionByEvictionAPI", ""]),
                    "message": st.text(max_size=10),
                }
            ),
            max_size=3,
        ),
        "containerStatuses": st.lists(
            st.fixed_dictionaries(
                {
                    "name": st.sampled_from([CONTAINER_NAME, "sidecar"]),
                    "state": st.sampled_from(
                        [
                            {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
                            {"waiting": {"reason": "ImagePullBackOff", "message": "no"}},
                            {"terminated": {"exitCode": 137, "reason": "OOMKilled", "message": '{"step": 3}'}},
                        ]
                    ),
                }
            ),
            max_size=2,
        ),
    },
)


@settings(max_examples=300, deadline=None)
@given(
    status=STATUSES,
    node=st.none() | st.just("node-1"),
    gated=st.booleans(),
    deleting=st.booleans(),
    managed=st.booleans(),
)
def test_the_pod_store_keeps_everything_observing_a_pod_reads(
    status: Manifest, node: str | None, gated: bool, deleting: bool, managed: bool
) -> None:
    """What the planner sees of a stored pod equals what it sees of the whole pod: its state, its last words and
    its address; the spec's containers, volumes and the rest are dropped."""
    whole = pod(make_job(), Replica("worker", 0), 1, gated=gated)
    whole["status"] = status
    if node:
        whole["spec"]["nodeName"] = node
    if deleting:
        whole["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    if managed:
        whole["metadata"]["managedFields"] = [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}]
    before = copy.deepcopy(whole)
    kept = essentials(whole)
    assert whole == before, "essentials changed the pod it was given"
    assert pod_state(kept, CONTAINER_NAME) == pod_state(whole, CONTAINER_NAME)
    assert final_report(kept) == final_report(whole)
    assert kept["status"].get("podIP") == whole["status"].get("podIP")
    assert "containers" not in kept["spec"] and "managedFields" not in kept["metadata"]
    assert len(repr(kept)) < len(repr(whole)) / 2


# -- the cached cluster ------------------------------------------------------------------------------------


def _tracked(uid: str) -> Manifest:
    job = make_job().to_manifest()
    job["metadata"].update(resourceVersion="3", uid=JOB_UID)
    job["status"] = {"trackedPods": [{"name": "job-worker-0-1", "uid": uid}]}
    return job


def _pod(uid: str) -> Manifest:
    manifest = pod(make_job(), Replica("worker", 0), 1, uid=uid)
    manifest["metadata"].update(namespace=NS, resourceVersion="4")
    return manifest


@pytest.mark.parametrize(
    ("stored", "deleted", "lists"),
    [(True, False, 0), (False, True, 0), (False, False, 1)],
    ids=["tracked-pod-in-store", "tracked-pod-seen-deleted", "tracked-pod-never-seen-lists-once"],
)
def test_pods_are_listed_from_the_apiserver_only_when_a_tracked_pod_is_unaccounted_for(
    stored: bool, deleted: bool, lists: int
) -> None:
    """The reconcile must not count a pod as vanished because the pod watch lags: unless the store holds every
    pod the status tracks as live, or saw it deleted, the pods are listed (and the list is what it reads)."""
    cluster, stores, fallbacks = FakeCluster(clock=lambda: T0), Stores(), []
    cluster.pods[(NS, "job-worker-0-1")] = _pod("uid-a")
    stores.jobs.saw(_tracked("uid-a"))
    if stored:
        stores.pods.saw(_pod("uid-a"))
    if deleted:
        stores.pods.apply("DELETED", _pod("uid-a"))
    cached = CachedCluster(cluster, stores, on_fallback=lambda: fallbacks.append(1))
    seen = [p["metadata"]["uid"] for p in cached.list_pods(NS, "job")]
    assert len(fallbacks) == lists
    assert seen == ([] if deleted else ["uid-a"])


NAMED = {"trackedPodRanges": [{"prefix": "job-worker-", "suffix": "-1", "indices": "0"}]}


@pytest.mark.parametrize(
    ("in_store", "lists"),
    [
        pytest.param({}, 0, id="running-pod-of-the-name"),
        pytest.param(None, 1, id="no-pod-of-the-name-lists"),
        pytest.param({"phase": "Failed", "exit_code": 1}, 1, id="failed-pod-of-the-name-lists"),
        pytest.param({"deleting": T0}, 1, id="deleted-pod-of-the-name-lists"),
    ],
)
def test_a_pod_recorded_by_name_is_read_from_the_store_only_while_a_healthy_pod_holds_the_name(
    in_store: dict[str, Any] | None, lists: int
) -> None:
    """A failed or going pod under a name recorded without a UID may be the name's earlier pod, counted already, in
    a store that has yet to see it go and its successor made (an earlier leader made it): the pods are listed,
    lest the planner count that failure again (model/tracked.py)."""
    cluster, stores, fallbacks = FakeCluster(clock=lambda: T0), Stores(), []
    cluster.pods[(NS, "job-worker-0-1")] = _pod("uid-new")
    job = _tracked("unused")
    job["status"] = NAMED
    stores.jobs.saw(job)
    if in_store is not None:
        manifest = pod(
            make_job(), Replica("worker", 0), 1, str(in_store.pop("phase", "Running")), uid="uid-old", **in_store
        )
        manifest["metadata"].update(namespace=NS, resourceVersion="4")
        stores.pods.saw(manifest)
    cached = CachedCluster(cluster, stores, on_fallback=lambda: fallbacks.append(1))
    seen = [p["metadata"]["uid"] for p in cached.list_pods(NS, "job")]
    assert len(fallbacks) == lists and seen == (["uid-new"] if lists else ["uid-old"])


def test_what_the_operator_wrote_is_remembered_by_kind_and_never_swallows_a_trials_watch_event() -> None:
    stores = Stores()
    trial = {"kind": "TrainingJob", "metadata": {"name": "s-0", "namespace": "ns", "uid": "u0", "resourceVersion": "2",
                                                 "labels": {SWEEP_LABEL: "s"}}}  # fmt: skip
    plain = {"kind": "TrainingJob", "metadata": {"name": "j", "namespace": "ns", "uid": "u1", "resourceVersion": "3"}}
    sweep = {"kind": "TrainingSweep", "metadata": {"name": "s", "namespace": "ns", "uid": "u2", "resourceVersion": "4"}}
    for manifest in (trial, plain, sweep):
        stores.saw(manifest)
    assert stores.jobs.get("ns", "s-0") and stores.jobs.get("ns", "j")
    assert len(stores.trials) == 0  # its watch event, not the write, changes the trials store (and wakes the sweep)
    assert stores.sweeps.get("ns", "s") and not stores.sweeps.get("ns", "j")


EVENT = st.tuples(
    st.sampled_from(["ADDED", "MODIFIED", "DELETED", "saw", "relist"]),
    st.sampled_from(["a", "b", "c"]),
    st.integers(1, 9),
    st.sampled_from(["job", "other", None]),
)


@given(st.lists(EVENT, max_size=30))
@settings(max_examples=200, deadline=None)
def test_a_packed_store_answers_as_a_plain_one(events: list[tuple[str, str, int, str | None]]) -> None:
    """Jobs are kept packed (compact JSON); whatever the events, every read answers as the plain store's, and a
    reader that changes what it got changes nothing stored."""
    plain, packed = by_label(), Store(lambda m: (m["metadata"].get("labels") or {}).get(JOB_LABEL), packed=True)
    for kind, name, version, job in events:
        manifest = obj(name, version, job=job, spec={"env": [{"name": "A", "value": str(version)}]})
        if kind == "saw":
            woken = plain.saw(copy.deepcopy(manifest)), packed.saw(copy.deepcopy(manifest))
        elif kind == "relist":
            listed = [packed.kept(manifest)]  # as an informer hands a list over: each kept as its page came in
            woken = plain.replace([copy.deepcopy(manifest)], str(version)), packed.replace(listed, str(version))
        else:
            woken = plain.apply(kind, copy.deepcopy(manifest)), packed.apply(kind, manifest)
        assert woken[0] == woken[1]
        for each in ("a", "b", "c"):
            assert plain.get(NS, each) == packed.get(NS, each)
        for group in ("job", "other"):
            assert plain.of_job(NS, group) == packed.of_job(NS, group)
    for found in packed.of_job(NS, "job"):
        found["metadata"]["name"] = "changed"
    assert plain.of_job(NS, "job") == packed.of_job(NS, "job")


def test_a_packed_store_is_listed_in_small_pages_each_kept_before_the_next() -> None:
    stores = Stores()
    made = {store: store_informer(None, source, store, lambda keys: None) for store, source in zip(
        stores.all, sources("ns"), strict=True)}  # fmt: skip
    assert {store.packed: informer.page for store, informer in made.items()} == {True: PACKED_PAGE, False: PAGE}
    assert all(informer.keep == store.kept for store, informer in made.items())
    assert stores.jobs.packed and stores.trials.packed and not stores.pods.packed
