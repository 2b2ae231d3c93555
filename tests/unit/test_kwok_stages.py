"""The cluster tier's kwok stages stand in for a kubelet, so they may do only what a kubelet does: a pod being
deleted has its deletion confirmed, and its finalizers are left to the controllers that own them. kwok's own stages
remove every finalizer; with that, a pod evicted before the operator recorded it vanished past the tracking
finalizer in the chaos test (a pod the operator never saw end), which no kubelet lets happen. Deletions are confirmed
by testbed/kwok_deletes.py, by UID, not by a stage."""

from typing import Any

import pytest
import yaml
from kubernetes import client
from testbed import kwok, kwok_deletes
from testbed.processes import free_port

pytestmark = pytest.mark.fast


def _stages() -> list[dict[str, Any]]:
    return [stage for stage in yaml.safe_load_all(kwok.STAGES) if stage]


def test_no_stage_removes_or_adds_a_finalizer() -> None:
    touching = [stage["metadata"]["name"] for stage in _stages() if "finalizers" in stage["spec"]["next"]]
    assert not touching, f"kwok stages that change finalizers, as no kubelet does: {touching}"


def test_no_stage_deletes_a_pod() -> None:
    """kwok's delete names the pod alone, so a late one can reach a namesake: testbed/kwok_deletes.py confirms
    deletions instead, by UID."""
    deleting = [stage["metadata"]["name"] for stage in _stages() if stage["spec"]["next"].get("delete")]
    assert not deleting, f"kwok stages that delete by name: {deleting}"


GRACE = {"deletionTimestamp": "2026-11-29T08:00:00Z", "deletionGracePeriodSeconds": 30}


@pytest.mark.parametrize(
    ("metadata", "node", "confirmed"),
    [
        pytest.param(GRACE, "gpu-node-0", True, id="deleted-with-grace"),
        pytest.param({}, "gpu-node-0", False, id="not-deleted"),
        pytest.param({**GRACE, "deletionGracePeriodSeconds": 0}, "gpu-node-0", False, id="confirmed-already"),
        pytest.param(GRACE, None, False, id="never-scheduled"),
    ],
)
def test_which_pods_wait_for_a_kubelet_to_confirm_their_deletion(
    metadata: dict[str, Any], node: str | None, confirmed: bool
) -> None:
    pod = {"metadata": {"name": "p", **metadata}, "spec": {"nodeName": node} if node else {}}
    assert kwok_deletes.needs_confirming(pod) is confirmed


def test_a_confirmation_the_apiserver_did_not_answer_is_tried_again() -> None:
    """None (try again), not False (nothing to confirm): a pod whose confirmation is dropped stays Terminating."""
    configuration = client.Configuration()
    configuration.host = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    configuration.retries = 0
    confirmer = kwok_deletes.DeletionConfirmer(client.ApiClient(configuration), workers=0)
    assert confirmer.confirm(kwok_deletes.Ask("ns", "pod", "uid-1", "gpu-node-0")) is None


def test_the_node_watch_knows_which_nodes_are_kwok_s_and_forgets_a_deleted_one() -> None:
    nodes = kwok_deletes.KwokNodes()
    bare = kwok.gpu_node("no-kubelet", "127.0.10.97")
    del bare["metadata"]["annotations"][kwok.NODE_ANNOTATION]
    nodes.replace([kwok.gpu_node("gpu-node-0", "127.0.10.10"), bare], "1")
    nodes.apply("ADDED", kwok.gpu_node("extra", "127.0.10.11"))
    nodes.apply("DELETED", kwok.gpu_node("gpu-node-0", "127.0.10.10"))
    assert nodes.kwok == {"no-kubelet": False, "extra": True}
