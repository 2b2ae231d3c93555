"""A suspended rank's last words reach the status although the kubelet deleted its pod a moment after writing them:
the pod watch's DELETED event holds the pod's final state, and the operator keeps its trainer's termination message
(runtime/last_words.py) for the reconcile that runs after the pod is gone."""

import copy
import json
from typing import Any

import pytest
from tests.support.builders import SETTINGS, T0, job_manifest
from tests.support.fake_cluster import FakeCluster

from trainingjob.children.naming import CONTAINER_NAME, INDEX_LABEL, ROLE_LABEL
from trainingjob.reconcile.job import reconcile
from trainingjob.runtime.cached import CachedCluster
from trainingjob.runtime.last_words import LastWords
from trainingjob.runtime.memory import Stores

pytestmark = pytest.mark.fast

NS = "ns"
RANK0 = "job-worker-0-1"
FINAL = {"attempt": 1, "step": 6221, "heartbeat": T0.timestamp(), "exitCode": 79}
CHECKPOINT = {"lastCheckpointStep": 6221, "lastCheckpointPath": "/c/step-6221", "lastCheckpointTime": T0.timestamp()}


def _ended(pod: dict[str, Any], said: dict[str, Any] | None) -> dict[str, Any]:
    """The pod's final state as the kubelet writes it just before deleting it: exit 79, its last words."""
    final = copy.deepcopy(pod)
    terminated: dict[str, Any] = {"exitCode": 79, "reason": "Error", "finishedAt": T0.isoformat()}
    if said is not None:
        terminated["message"] = json.dumps(said)
    final["status"] = {
        "phase": "Failed",
        "containerStatuses": [{"name": CONTAINER_NAME, "state": {"terminated": terminated}}],
    }
    return final


def _suspended_running_job() -> tuple[FakeCluster, Stores]:
    """A job whose two pods ran (rank 0 reported the checkpoint at step 6000) and were deleted by its suspension."""
    cluster = FakeCluster(clock=lambda: T0)
    cluster.submit(job_manifest(namespace=NS))
    for _ in range(2):
        reconcile(cluster, NS, "job", now=T0, settings=SETTINGS)
    for key in list(cluster.pods):
        cluster.run(*key)
    cluster.reports[RANK0] = (None, None)
    reconcile(cluster, NS, "job", now=T0, settings=SETTINGS)
    cluster.edit_spec(NS, "job", lambda spec: spec.setdefault("runPolicy", {}).update(suspend=True))
    reconcile(cluster, NS, "job", now=T0, settings=SETTINGS)
    stores = Stores()
    stores.jobs.saw(cluster.jobs[(NS, "job")])
    return cluster, stores


@pytest.mark.parametrize(
    ("said", "uid", "step"),
    [({**FINAL, **CHECKPOINT}, None, 6221), ({**FINAL, **CHECKPOINT}, "a-namesake", None), (None, None, None)],
    ids=["its-final-checkpoint", "a-namesake-is-not-read", "it-said-nothing"],
)
def test_a_suspended_rank_gone_before_the_reconcile_still_names_its_final_checkpoint(
    said: dict[str, Any] | None, uid: str | None, step: int | None
) -> None:
    cluster, stores = _suspended_running_job()
    assert cluster.job_status(NS, "job")["phase"] == "Suspended"
    for key, pod in list(cluster.pods.items()):
        final = _ended(pod, said)
        if uid is not None:
            final["metadata"]["uid"] = uid
        stores.pods.saw(pod)
        stores.pods.apply("DELETED", final)  # the kubelet's final status and its deletion, before the reconcile
        del cluster.pods[key]
    reconcile(CachedCluster(cluster, stores), NS, "job", now=T0, settings=SETTINGS)
    status = cluster.job_status(NS, "job")
    assert (status.get("lastCheckpoint") or {}).get("step") == step
    assert status.get("phase") == "Suspended"


def _meta(name: str, uid: str, index: str = "0") -> dict[str, Any]:
    labels = {ROLE_LABEL: "worker", INDEX_LABEL: index}
    return {"metadata": {"name": name, "namespace": NS, "uid": uid, "labels": labels}}


def test_rank_0s_last_words_are_kept_a_while_and_only_so_many() -> None:
    now = [0.0]
    words = LastWords(seconds=60, limit=2, clock=lambda: now[0])
    pods = [_ended(_meta(f"p{i}", f"u{i}"), FINAL) for i in range(3)]
    words.heard(_ended(_meta("quiet", "q"), None))
    words.heard(_ended(_meta("rank-1", "r", index="1"), FINAL))
    for pod in pods:
        words.heard(pod)
    assert words.of(NS, "quiet") is None and words.of(NS, "rank-1") is None  # said nothing; not rank 0
    assert words.of(NS, "p0") is None  # the oldest of three
    found = words.of(NS, "p2")
    assert found is not None and found[0] == "u2" and json.loads(found[1]) == FINAL
    now[0] = 61.0
    assert words.of(NS, "p2") is None
