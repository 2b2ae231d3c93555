"""An apiserver that pushes back: with at most one mutating request in flight (--max-mutating-requests-inflight=1,
as an overloaded apiserver answers 429 under priority and fairness), the operator creates a 64-rank gang by
slowing its own pace and waiting as asked, without a single reconcile failing; its metrics show the 429s and
the lowered limit. A control plane of its own (etcd + kube-apiserver)."""

from collections.abc import Iterator

import pytest
from kubernetes import client
from testbed.controlplane import ControlPlane, running
from testbed.crds import prepare_bare_plane
from testbed.harness import Harness
from testbed.operator import operator_running
from testbed.processes import poll_until
from tests.support.builders import job_manifest

pytestmark = pytest.mark.envtest
RANKS = 64
OPERATOR_USER = "throttled-operator"
RBAC = "rbac.authorization.k8s.io"


class OneWriteAtATime(ControlPlane):
    def _listen_args(self) -> list[str]:
        return [*super()._listen_args(), "--max-mutating-requests-inflight=1"]


@pytest.fixture
def plane() -> Iterator[ControlPlane]:
    with running(cluster=False, prefix="tj-throttled-", kind=OneWriteAtATime) as own:
        with own.api_client() as api:
            prepare_bare_plane(api, "team")
            # Not system:masters, whose requests the in-flight limit never throttles: cluster-admin by a binding.
            binding = {
                "metadata": {"name": "throttled-operator"},
                "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "cluster-admin"},
                "subjects": [{"apiGroup": RBAC, "kind": "User", "name": OPERATOR_USER}],
            }
            client.RbacAuthorizationV1Api(api).create_cluster_role_binding(binding)
        yield own


def test_a_throttling_apiserver_slows_the_operator_down_instead_of_failing_its_reconciles(plane: ControlPlane) -> None:
    kubeconfig = plane.user_kubeconfig(OPERATOR_USER)
    # The scraper's token is made with the admin's kubeconfig (system:masters, never throttled): made as the
    # operator's user, its writes met the same 429s the test provokes, and the scrape failed.
    with operator_running(kubeconfig, plane.kubeconfig, TJ_OPERATOR_MAX_WRITES_IN_FLIGHT="16") as operator:
        with plane.api_client() as api:
            h = Harness(api, "team", operator)
            h.create(job_manifest("wide", workers=RANKS))

            def created() -> bool:
                pods = h.pods("wide")
                gated = [p for p in pods if p.spec.scheduling_gates]
                return len(pods) == RANKS and not gated

            poll_until(created, timeout=120, what=f"{RANKS} pods created and released from the tracking gate")
        # The operator reviews the scraper's token with a TokenReview, a write this apiserver may answer 429 too:
        # a refused scrape (-1) is asked again until one answers.
        throttled = poll_until(
            lambda: (found := operator.metric("trainingjob_writes_throttled_total")) >= 0 and found,
            timeout=60, what="a scrape of the operator's metrics answered",
        )  # fmt: skip
        limit = operator.metric("trainingjob_writes_in_flight_limit")
        log = operator.log()
    print(f"429s: {throttled:.0f}; write limit now {limit:.1f} of 16")
    assert throttled > 0, "the apiserver never pushed back: this test measured nothing"
    assert 1 <= limit < 16, "the operator did not slow down"
    failed = [line for line in log.splitlines() if "retrying in" in line or "Traceback" in line]
    assert not failed, "\n".join(failed[:5])
