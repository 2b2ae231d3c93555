"""The SDK on a real node: the notebook-style example submits a job, waits for it and prints its metrics; the
finished rank's log is read through the SDK, whole and followed."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from testbed.examples import EXAMPLES
from testbed.harness import Harness
from testbed.node import NodeTier
from testbed.node_jobs import claim_on_local_volume, example

from trainingjob_sdk import Client

pytestmark = pytest.mark.node


def test_the_quickstart_submits_waits_and_prints_the_metrics(node_tier: NodeTier, nh: Harness, tmp_path: Path) -> None:
    claim_on_local_volume(node_tier, nh.ns, "digits-ddp-checkpoints")
    job = example("digits-ddp.yaml")[0]
    job["spec"]["trainer"]["steps"] = 100  # the example's job, shorter
    job["spec"]["checkpoint"]["everySteps"] = 50
    manifest = tmp_path / "digits-ddp.yaml"
    manifest.write_text(yaml.safe_dump(job))
    kubeconfig = yaml.safe_load(node_tier.plane.kubeconfig.read_text())
    for context in kubeconfig["contexts"]:
        context["context"]["namespace"] = nh.ns  # as `kubectl config set-context --current --namespace` would
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(kubeconfig))
    environment = {**os.environ, "KUBECONFIG": str(tmp_path / "kubeconfig")}
    environment.pop("TJCTL_SERVER", None)
    ran = subprocess.run(
        [sys.executable, str(EXAMPLES / "sdk_quickstart.py"), str(manifest)],
        env=environment, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    submitted = re.search(rf"submitted (sdk-quickstart-[a-z0-9]{{5}}) to {nh.ns}\n", ran.stdout)
    assert submitted, ran.stdout  # a name of its own, not the NOTES' digits-ddp
    assert "succeeded in attempt 1: {" in ran.stdout and "accuracy" in ran.stdout, ran.stdout

    name = submitted.group(1)
    with Client.kube(tmp_path / "kubeconfig") as sdk:
        whole = "".join(sdk.logs(name, replica="worker-0"))
        followed = list(sdk.logs(name, replica="worker-1", follow=True))  # ends with the container
        assert "starting from step 0" in whole, whole[-2000:]  # the trainer's own words, through the SDK
        assert followed and "".join(followed) == "".join(sdk.logs(name, replica="worker-1")), followed[-5:]
        assert list(sdk.logs(name, tail=3)) == whole.splitlines(keepends=True)[-3:]
