"""Room on the nodes for more of a shrunk elastic job's workers (children/room.py): allocatable less what the
unfinished pods bound there request, on Ready, uncordoned nodes the pod may go to."""

from typing import Any

import pytest

from trainingjob.children.room import spare_pods

pytestmark = pytest.mark.fast
GPU = "nvidia.com/gpu"


def node(name: str, gpus: int = 1, *, ready: bool = True, **spec: Any) -> dict[str, Any]:
    allocatable = {"cpu": "8", "memory": "32Gi", "pods": "110", GPU: str(gpus)}
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    metadata = {"name": name, "labels": {"pool": "gpu"}}
    return {"metadata": metadata, "spec": spec, "status": {"allocatable": allocatable, "conditions": conditions}}


def bound(on: str, gpus: int = 1, phase: str = "Running") -> dict[str, Any]:
    container = {"name": "c", "resources": {"limits": {GPU: str(gpus)}, "requests": {"cpu": "1"}}}
    return {"spec": {"nodeName": on, "containers": [container]}, "status": {"phase": phase}}


WORKER = {"spec": {"containers": [{"name": "trainer", "resources": {"limits": {GPU: "1"}}}]}}
TAINT = {"key": "spot", "value": "yes", "effect": "NoSchedule"}
TOLERATING = {"spec": {**WORKER["spec"], "tolerations": [{"key": "spot", "operator": "Exists"}]}}


@pytest.mark.parametrize(
    ("nodes", "pods", "wanted", "expected"),
    [
        pytest.param([node("a"), node("b")], [bound("a")], WORKER, 1, id="one-node-free-of-two"),
        pytest.param([node("a"), node("b")], [bound("a"), bound("b")], WORKER, 0, id="all-taken"),
        pytest.param([node("a")], [bound("a", phase="Succeeded")], WORKER, 1, id="a-finished-pod-holds-nothing"),
        pytest.param([node("a", 8)], [bound("a", 3)], WORKER, 3, id="capped-at-what-is-wanted"),
        pytest.param([node("a", ready=False), node("b", unschedulable=True)], [], WORKER, 0, id="unready-cordoned"),
        pytest.param([node("a", taints=[TAINT])], [], WORKER, 0, id="an-untolerated-taint"),
        pytest.param([node("a", taints=[TAINT])], [], TOLERATING, 1, id="a-tolerated-taint"),
        pytest.param(
            [node("a")], [], {"spec": {**WORKER["spec"], "nodeSelector": {"pool": "cpu"}}}, 0, id="not-selected",
        ),
        pytest.param([node("a", 0)], [], WORKER, 0, id="no-gpu-there"),
    ],
)  # fmt: skip
def test_spare_pods(
    nodes: list[dict[str, Any]], pods: list[dict[str, Any]], wanted: dict[str, Any], expected: int
) -> None:
    assert spare_pods(nodes, pods, wanted, at_most=3) == expected
