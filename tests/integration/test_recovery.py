"""Recovery after an apiserver restart: the operator's watches reconnect (listing again, since the new apiserver
cannot resume them: 410 Gone) and it acts again soon after the apiserver answers: while the apiserver is down it
asks again at most a second apart (what it says it waits, read from its log, not the machine's speed). A control
plane of its own (etcd + kube-apiserver), since its apiserver is restarted; with no kubelet here, the test writes
the pods' status itself."""

import re
import time
from collections.abc import Iterator

import pytest
from testbed.controlplane import ControlPlane, running
from testbed.crds import prepare_bare_plane
from testbed.harness import Harness
from testbed.operator import operator_running
from testbed.processes import poll_until
from tests.support.builders import job_manifest

pytestmark = pytest.mark.envtest
OUTAGE_SECONDS = 12.0  # past the point where kopf's default retries are 8 s apart
RESOURCES = ("trainingjobs", "pods", "services")
LONGEST_RETRY_SECONDS = 1.0  # the informers' and the reconcile queue's longest wait while the apiserver is away


@pytest.fixture
def plane() -> Iterator[ControlPlane]:
    with running(cluster=False, prefix="tj-recovery-") as own:
        with own.api_client() as api:
            prepare_bare_plane(api, "team")
        yield own


def run_pods(h: Harness, name: str, attempt: int) -> list[str]:
    def created() -> list[str] | None:
        names = [p.metadata.name for p in h.pods(name) if p.metadata.labels["trainingjob.io/attempt"] == str(attempt)]
        return names if len(names) == 2 else None

    names = poll_until(created, timeout=30, what=f"the pods of attempt {attempt}")
    for pod in names:
        h.core.patch_namespaced_pod_status(pod, h.ns, {"status": {"phase": "Running"}})
    return names


def test_the_operator_acts_within_seconds_of_the_apiserver_answering_again(plane: ControlPlane) -> None:
    with operator_running(plane.kubeconfig, TJ_OPERATOR_BACKOFF_BASE_SECONDS="0.1") as operator:
        with plane.api_client() as api:
            h = Harness(api, "team", operator)
            h.create(job_manifest("steady"))
            first = run_pods(h, "steady", 1)
            h.wait_phase("steady", "Running")
        plane.restart_apiserver(down_for=OUTAGE_SECONDS)
        answered = time.monotonic()
        with plane.api_client() as api:
            h = Harness(api, "team", operator)
            h.finish(first[1], 75)
            h.wait("steady", lambda job: job["status"]["attempt"] == 2, "the restart of the gang", timeout=30)
            acted = time.monotonic() - answered
        relists = {r: operator.metric(f'trainingjob_cache_relists_total{{resource="{r}"}}') for r in RESOURCES}
        waits = [float(w) for w in re.findall(r"retrying in ([0-9.]+) s", operator.log())]
    print(f"relists after the restart: {relists}; waits while it was down: {waits}")
    print(f"the operator restarted the gang {acted:.2f} s after the apiserver answered again")
    assert waits and max(waits) <= LONGEST_RETRY_SECONDS, waits  # kopf's default would reach 8 s by now
    # The restarted apiserver's watch cache starts at the newest version (the job's last status write): the pod
    # watch, last at an older version, cannot resume (410 Gone) and had to list again.
    assert relists["pods"] >= 1, relists
