"""Kueue's waitForPodsReady against the real Kueue manager (configured with a short timeout, so this module runs
its own): the operator sets the Workload's PodsReady as Kueue's job integrations do, so a job whose pods all come
up stays admitted past the timeout, and one whose pods never come up is evicted (PodsReadyTimeout) and suspended,
its quota released. The rest of the Kueue tests: test_kueue.py."""

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from testbed.controlplane import ControlPlane
from testbed.harness import Harness, condition
from testbed.kueue import KueueProcess, kueue_running
from testbed.processes import poll_until
from tests.support.kueue_cluster import (  # the fixtures use this module's `kueue`
    chart_operator,
    gang_job,
    h,
    queue,
    workload,
    workload_condition,
)

pytestmark = pytest.mark.cluster
TIMEOUT = 20  # seconds: Kueue's waitForPodsReady timeout, counted from the admission


@pytest.fixture(scope="module")
def kueue(cluster: ControlPlane) -> Iterator[KueueProcess]:
    with (
        tempfile.TemporaryDirectory(prefix="tj-kueue-") as root,
        kueue_running(cluster, Path(root), pods_ready_timeout=TIMEOUT) as process,
    ):
        yield process


def _pods_ready(found: dict[str, Any] | None) -> tuple[str, str] | None:
    conditions = ((found or {}).get("status") or {}).get("conditions") or []
    return next(((c["status"], c["reason"]) for c in conditions if c["type"] == "PodsReady"), None)


def test_a_job_whose_pods_come_up_says_so_and_is_not_evicted(h: Harness, queue: str) -> None:
    h.create(gang_job("ready", queue))
    h.wait_running_pods("ready", 2, attempt=1)
    poll_until(lambda: _pods_ready(workload(h, "ready")) == ("True", "Started"), timeout=30, what="PodsReady true")
    with pytest.raises(TimeoutError):  # past Kueue's timeout: no eviction
        poll_until(
            lambda: workload_condition(workload(h, "ready"), "Evicted") == "True", timeout=TIMEOUT + 5, what="evicted"
        )
    job = h.job("ready")
    assert job["status"]["phase"] == "Running" and job["status"]["attempt"] == 1


def test_a_job_whose_pods_never_come_up_is_evicted_and_gives_back_its_quota(h: Harness, queue: str) -> None:
    nowhere = {
        "workers": {"replicas": 2, "resources": {"limits": {"nvidia.com/gpu": 4}}, "nodeSelector": {"none": "x"}}
    }
    h.create(gang_job("stuck", queue, **nowhere))
    suspended = h.wait_phase("stuck", "Suspended", timeout=TIMEOUT + 60)
    assert condition(suspended, "Suspended")["reason"] == "PodsReadyTimeout"
    poll_until(
        lambda: workload_condition(workload(h, "stuck"), "QuotaReserved") == "False",
        timeout=30,
        what="the evicted job's quota reservation released",
    )
