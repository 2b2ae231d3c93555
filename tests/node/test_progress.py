"""Progress from a real pod IP: `kubectl get tj` shows step and loss moving while rank 0 trains; a hung trainer
(SIGSTOP) stops reporting and is restarted as Stalled after progressDeadlineSeconds, in its pods: its agent still
answers."""

import signal

import pytest
from testbed.harness import Harness
from testbed.node import NodeTier
from testbed.node_cluster import kubectl, signal_trainer
from testbed.node_jobs import example, pod_of
from testbed.processes import poll_until
from tests.support.kubectl import table

pytestmark = pytest.mark.node

DEADLINE_SECONDS = 20


def _step_and_loss(tier: NodeTier, namespace: str, name: str) -> tuple[int, float] | None:
    """STEP and LOSS of `kubectl get tj`, as a person reads them; None while the trainer has not reported."""
    (cells,) = table(kubectl(tier, "get", "tj", name, "-n", namespace))
    if not cells["STEP"] or not cells["LOSS"]:
        return None
    return int(cells["STEP"]), float(cells["LOSS"])


def test_kubectl_shows_progress_and_a_hung_trainer_is_restarted_as_stalled(node_tier: NodeTier, nh: Harness) -> None:
    job = example("digits-ddp.yaml")[0]
    job["metadata"]["name"] = name = "progress"
    job["spec"]["trainer"]["steps"] = 100000
    job["spec"]["checkpoint"]["volume"] = {"emptyDir": {}}
    job["spec"]["workers"]["terminationGracePeriodSeconds"] = 5
    job["spec"]["runPolicy"]["progressDeadlineSeconds"] = DEADLINE_SECONDS
    nh.create(job)

    first = poll_until(lambda: _step_and_loss(node_tier, nh.ns, name), timeout=300, what="a reported step")

    def moved() -> tuple[int, float] | None:
        now = _step_and_loss(node_tier, nh.ns, name)
        return now if now is not None and now[0] > first[0] else None

    later = poll_until(moved, timeout=60, what=f"the step to move past {first[0]}")
    assert later[1] != first[1], f"the loss did not change between steps {first[0]} and {later[0]}"

    signal_trainer(node_tier, pod_of(nh, name, "worker", 0, attempt=1), signal.SIGSTOP)  # the trainer, not its agent
    stalled = nh.wait(name, lambda j: j["status"].get("attempt", 0) >= 2, "a restart as Stalled", 180)["status"]
    assert stalled["restarts"]["stalled"] == 1, stalled["restarts"]
    assert stalled["inPlaceRestarts"] == 1 and stalled["podsAttempt"] == 1, stalled
    assert stalled["lastFailure"]["failureClass"] == "Stalled", stalled["lastFailure"]
    nh.patch_spec(name, {"runPolicy": {"suspend": True}})  # free the node for the next test
