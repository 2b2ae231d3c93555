"""The cluster tier's kwok stages stand in for a kubelet, so they may do only what a kubelet does: a pod being
deleted has its deletion confirmed, and its finalizers are left to the controllers that own them. kwok's own stages
remove every finalizer; with that, a pod evicted before the operator recorded it vanished past the tracking
finalizer in the chaos test (a pod the operator never saw end), which no kubelet lets happen."""

from typing import Any

import pytest
import yaml
from testbed import kwok

pytestmark = pytest.mark.fast


def _stages() -> list[dict[str, Any]]:
    return [stage for stage in yaml.safe_load_all(kwok.STAGES) if stage]


def test_no_stage_removes_or_adds_a_finalizer() -> None:
    touching = [stage["metadata"]["name"] for stage in _stages() if "finalizers" in stage["spec"]["next"]]
    assert not touching, f"kwok stages that change finalizers, as no kubelet does: {touching}"


def test_a_pod_being_deleted_has_its_deletion_confirmed() -> None:
    deleting = [
        stage
        for stage in _stages()
        if stage["spec"]["resourceRef"]["kind"] == "Pod"
        and any(
            e["key"] == ".metadata.deletionTimestamp" and e["operator"] == "Exists"
            for e in stage["spec"]["selector"]["matchExpressions"]
        )
    ]
    assert [stage["spec"]["next"].get("delete") for stage in deleting] == [True]
