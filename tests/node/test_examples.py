"""The examples as shipped, on a real node: an unmodified torchrun script with two processes per pod runs to
Succeeded; a non-root trainer writes checkpoints to a volume that starts root-owned (fsGroup); the GPU example
applies and says why it waits on a node without GPUs."""

import json
import os
import re

import pytest
from kubernetes import utils
from testbed.examples import EXAMPLES
from testbed.harness import Harness
from testbed.node import NodeTier
from testbed.node_jobs import apply_claim, checkpoint_steps, claim_on_local_volume, example, log_of, pod_of

from trainingjob.model.security import TRAINER_UID

pytestmark = pytest.mark.node


def test_an_unmodified_torchrun_script_runs_two_processes_per_pod(node_tier: NodeTier, nh: Harness) -> None:
    with node_tier.api_client() as api:
        utils.create_from_yaml(api, str(EXAMPLES / "torchrun-script-configmap.yaml"), namespace=nh.ns)
    job = example("torchrun-script.yaml")[0]
    nh.create(job)
    name = job["metadata"]["name"]
    done = nh.wait_phase(name, "Succeeded", timeout=300)["status"]
    if done["attempt"] != 1:  # e.g. a rank that aborts as gloo is torn down at exit; pytest.fail keeps it whole
        pytest.fail(f"attempt 1 failed:\n{json.dumps(done.get('lastFailure'), indent=1)}")
    logs = log_of(nh, pod_of(nh, name, "worker", 0, attempt=1)) + log_of(nh, pod_of(nh, name, "worker", 1, 1))
    # Two processes share each pod's log, so their lines may interleave: find the phrases, not the lines.
    assert set(re.findall(r"rank (\d) of 4: epoch 2 loss", logs)) == {"0", "1", "2", "3"}, logs


def test_a_non_root_trainer_checkpoints_to_a_root_owned_volume(node_tier: NodeTier, nh: Harness) -> None:
    folder = claim_on_local_volume(node_tier, nh.ns, "digits-ddp-checkpoints")
    assert (folder.stat().st_uid, folder.stat().st_mode & 0o777) == (0, 0o755)
    job = example("digits-ddp.yaml")[0]
    job["spec"]["trainer"]["steps"] = 100
    job["spec"]["checkpoint"]["everySteps"] = 50
    nh.create(job)
    done = nh.wait_phase(job["metadata"]["name"], "Succeeded", timeout=300)["status"]
    assert checkpoint_steps(folder) == [50, 100]
    assert done["lastCheckpoint"]["step"] == 100, done.get("lastCheckpoint")
    written = [path for path in folder.rglob("*") if path.is_file()]
    assert written, f"no checkpoint files under {folder}"
    assert {os.stat(path).st_uid for path in written} == {TRAINER_UID}
    assert {os.stat(path).st_gid for path in written} == {TRAINER_UID}  # the pod's fsGroup


def test_the_gpu_example_applies_and_says_why_it_waits(node_tier: NodeTier, nh: Harness) -> None:
    apply_claim(nh, "gpu-ddp-checkpoints.yaml")
    job = example("gpu-ddp.yaml")[0]
    nh.create(job)
    name = job["metadata"]["name"]
    pending = nh.wait(
        name, lambda j: "nvidia.com/gpu" in str(j.get("status", {}).get("conditions")), "a reason to wait", 120
    )
    assert pending["status"]["phase"] == "Pending", pending["status"]
