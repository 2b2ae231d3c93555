"""Room on the nodes for more of a job's worker pods, pure: what a shrunk elastic job grows back into
(plan/elastic.py's `spare`).

A node counts when it is Ready, not cordoned, carries the labels the pod's nodeSelector names and has no NoSchedule
or NoExecute taint the pod does not tolerate; its room is its allocatable resources less the requests of the
unfinished pods bound to it, and the pods that fit there are as many as each resource the pod requests allows
(the pod count included). Affinity, topology spread and ports are not weighed: the count is what the scheduler
would be asked to place, and a Grow it overestimates shrinks back after resizeWaitSeconds (plan/resize.py)."""

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from trainingjob.model import parse_quantity

Manifest = Mapping[str, Any]
FINISHED = ("Succeeded", "Failed")


def requests_of(pod: Manifest) -> dict[str, Decimal]:
    """What a pod requests: its containers' requests (their limits where they name none, as the apiserver defaults
    them), summed, with the larger of an init container's; and one pod."""
    spec = pod.get("spec") or {}
    total: dict[str, Decimal] = {"pods": Decimal(1)}
    for container in spec.get("containers") or []:
        for name, amount in _container_requests(container).items():
            total[name] = total.get(name, Decimal(0)) + amount
    for container in spec.get("initContainers") or []:
        for name, amount in _container_requests(container).items():
            total[name] = max(total.get(name, Decimal(0)), amount)
    return total


def _container_requests(container: Manifest) -> dict[str, Decimal]:
    resources = container.get("resources") or {}
    named = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {name: _quantity(value) for name, value in named.items()}


def _quantity(value: Any) -> Decimal:
    try:
        return parse_quantity(value)
    except (ValueError, ArithmeticError):
        return Decimal(0)


def _ready(node: Manifest) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    return ready and not (node.get("spec") or {}).get("unschedulable")


def _tolerated(taint: Manifest, tolerations: list[Manifest]) -> bool:
    if taint.get("effect") not in ("NoSchedule", "NoExecute"):
        return True
    for toleration in tolerations:
        if toleration.get("effect") not in (None, "", taint.get("effect")):
            continue
        if toleration.get("operator") == "Exists" and toleration.get("key") in (None, "", taint.get("key")):
            return True
        if toleration.get("key") == taint.get("key") and toleration.get("value", "") == taint.get("value", ""):
            return True
    return False


def _admits(node: Manifest, pod: Manifest) -> bool:
    spec = pod.get("spec") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    selector = spec.get("nodeSelector") or {}
    if any(labels.get(key) != value for key, value in selector.items()):
        return False
    tolerations = spec.get("tolerations") or []
    return all(_tolerated(t, tolerations) for t in (node.get("spec") or {}).get("taints") or [])


def spare_pods(nodes: Iterable[Manifest], pods: Iterable[Manifest], wanted: Manifest, at_most: int) -> int:
    """How many more pods like `wanted` fit on the nodes beside the unfinished `pods` bound to them, at most
    `at_most`."""
    used: dict[str, dict[str, Decimal]] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in FINISHED:
            continue
        on = used.setdefault(node, {})
        for name, amount in requests_of(pod).items():
            on[name] = on.get(name, Decimal(0)) + amount
    need, fits = requests_of(wanted), 0
    for node in nodes:
        if not _ready(node) or not _admits(node, wanted):
            continue
        allocatable = {k: _quantity(v) for k, v in ((node.get("status") or {}).get("allocatable") or {}).items()}
        taken = used.get(str((node.get("metadata") or {}).get("name")), {})
        counts = [
            int((allocatable.get(name, Decimal(0)) - taken.get(name, Decimal(0))) // amount)
            for name, amount in need.items()
            if amount > 0
        ]
        fits += max(min(counts, default=at_most), 0)
        if fits >= at_most:
            return at_most
    return fits
