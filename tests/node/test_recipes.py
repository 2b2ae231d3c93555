"""A user's own model in real containers: the shapes recipe (examples/image-classification), its code from a
ConfigMap, in DDP with a rank killed part-way and in parameter-server mode; both end Succeeded with the final
evaluation in status.result and the metrics history on the checkpoint volume."""

import json
import signal
from pathlib import Path
from typing import Any

import pytest
from kubernetes import utils
from testbed.examples import EXAMPLES
from testbed.harness import Harness
from testbed.node import NodeTier
from testbed.node_cluster import signal_container
from testbed.node_jobs import apply_claim, example, log_of, pod_of, result_accuracy, resumed_steps

pytestmark = pytest.mark.node

GOAL = 0.9


def shapes_job(node_tier: NodeTier, nh: Harness, manifest: str) -> tuple[dict[str, Any], Path]:
    """The ConfigMap and the claim applied, the job's manifest as shipped; returns it and the volume's folder."""
    with node_tier.api_client() as api:
        utils.create_from_yaml(api, str(EXAMPLES / "image-classification" / "shapes-code.yaml"), namespace=nh.ns)
    volume = apply_claim(nh, "image-classification/shapes-checkpoints.yaml")
    return example(f"image-classification/{manifest}")[0], volume


def test_the_recipe_in_ddp_resumes_after_a_killed_rank_and_reports_its_accuracy(
    node_tier: NodeTier, nh: Harness
) -> None:
    job, volume = shapes_job(node_tier, nh, "shapes-ddp.yaml")
    job["spec"]["trainer"]["steps"] = 600  # long enough to be killed part-way on a fast machine
    name = job["metadata"]["name"]
    nh.create(job)
    nh.wait(name, lambda j: (j.get("status", {}).get("lastCheckpoint") or {}).get("step", 0) >= 50, "a checkpoint", 300)
    signal_container(node_tier, pod_of(nh, name, "worker", 1, attempt=1), signal.SIGKILL)

    done = nh.wait_phase(name, "Succeeded", timeout=600)["status"]
    assert done["attempt"] == 2, done
    resumed = resumed_steps(log_of(nh, pod_of(nh, name, "worker", 0, attempt=2)))
    assert resumed and resumed[0] >= 50, resumed
    assert result_accuracy(done) >= GOAL, done["result"]
    assert done["result"]["metricsStep"] == done["result"]["step"] == 600, done["result"]
    assert done["progress"]["percent"] == 100, done["progress"]
    history = [json.loads(line) for path in volume.glob("*/*/metrics.jsonl") for line in path.read_text().splitlines()]
    assert [line["step"] for line in history if line["kind"] == "eval"] == [100, 200, 300, 400, 500, 600]


def test_the_recipe_in_parameter_server_mode_reports_its_accuracy(node_tier: NodeTier, nh: Harness) -> None:
    job, _ = shapes_job(node_tier, nh, "shapes-ps.yaml")
    nh.create(job)
    done = nh.wait_phase(job["metadata"]["name"], "Succeeded", timeout=600)["status"]
    assert result_accuracy(done) >= GOAL, done["result"]
    assert done["result"]["step"] == job["spec"]["trainer"]["steps"], done["result"]
