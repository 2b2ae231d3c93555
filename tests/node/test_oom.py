"""A real cgroup's OOM kill: a worker whose memory limit is below what PyTorch needs ends OOMKilled with exit
137 from the kernel, and the operator classifies the failure as an OOM."""

import pytest
from testbed.harness import Harness
from testbed.node_jobs import example

pytestmark = pytest.mark.node


def test_a_worker_over_its_memory_limit_is_oom_killed_and_classified_so(nh: Harness) -> None:
    job = example("digits-ddp.yaml")[0]
    job["metadata"]["name"] = "oom"
    job["spec"]["workers"]["replicas"] = 1
    job["spec"]["workers"]["resources"] = {"requests": {"cpu": "250m"}, "limits": {"memory": "48Mi"}}
    job["spec"]["checkpoint"]["volume"] = {"emptyDir": {}}
    job["spec"]["runPolicy"]["backoffLimit"] = 0
    nh.create(job)

    failed = nh.wait_phase("oom", "Failed", timeout=180)["status"]
    failure = failed["lastFailure"]
    assert (failure["exitCode"], failure["reason"], failure["failureClass"]) == (137, "OOMKilled", "OOMKilled"), failure
