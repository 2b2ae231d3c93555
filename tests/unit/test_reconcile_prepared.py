"""reconcile() against the in-memory cluster when the apiserver refuses an object the pods need: the objects go
first, on their own, and no pod is sent while one is refused; the refusal is written and announced once; the
pods come once it is accepted."""

from collections.abc import Sequence
from typing import Any

import pytest
from tests.support.builders import SETTINGS, T0, job_manifest
from tests.support.fake_cluster import FakeCluster

from trainingjob.kube.ports import Created
from trainingjob.plan.waves import Refusal
from trainingjob.reconcile.job import reconcile

pytestmark = pytest.mark.fast

NS = "ns"


class Refusing:
    """Wraps the fake's create: refuses every object of `kind` while `on`, and counts the pods it was sent."""

    def __init__(self, cluster: FakeCluster, kind: str) -> None:
        self.create, self.kind, self.on, self.pods_sent = cluster.create, kind, True, 0

    def __call__(self, namespace: str, manifests: Sequence[dict[str, Any]]) -> Created:
        self.pods_sent += sum(m["kind"] == "Pod" for m in manifests)
        refused = [m for m in manifests if self.on and m["kind"] == self.kind]
        done = self.create(namespace, [m for m in manifests if m not in refused])
        said = [Refusal(m["metadata"]["name"], 403, f"{self.kind} refused here", m["kind"]) for m in refused]
        return Created(done.pods, [*said, *done.refusals])


@pytest.mark.parametrize("kind", ["Secret", "Service", "NetworkPolicy"])
def test_no_pod_is_sent_while_an_object_it_needs_is_refused(kind: str) -> None:
    cluster = FakeCluster(clock=lambda: T0)
    refusing = Refusing(cluster, kind)
    cluster.create = refusing  # type: ignore[method-assign]
    cluster.submit(job_manifest(namespace=NS))
    for seconds in range(0, 60, 5):
        reconcile(cluster, NS, "job", now=T0.replace(second=seconds), settings=SETTINGS)
    assert refusing.pods_sent == 0 and not cluster.pods
    prepared = next(c for c in cluster.job_status(NS, "job")["conditions"] if c["type"] == "Prepared")
    assert prepared["reason"] == f"{kind}CreateRefused" and f"{kind} refused here" in prepared["message"]
    assert [e.reason for _, e in cluster.events].count(f"{kind}CreateRefused") == 1
    refusing.on = False
    reconcile(cluster, NS, "job", now=T0.replace(minute=5), settings=SETTINGS)
    assert len(cluster.pods) == 2


def test_a_service_refused_once_the_pods_run_then_accepted_leaves_the_job_prepared_with_its_key() -> None:
    """The Service deleted under running pods and its re-creation refused: Prepared False; once accepted, True
    again, and the key Secret (sent along while not Prepared, found existing) is still there."""
    cluster = FakeCluster(clock=lambda: T0)
    cluster.submit(job_manifest(namespace=NS))
    reconcile(cluster, NS, "job", now=T0, settings=SETTINGS)
    for key in list(cluster.pods):
        cluster.run(*key)
    del cluster.services[NS, "job"]
    refusing = Refusing(cluster, "Service")
    cluster.create = refusing  # type: ignore[method-assign]
    reconcile(cluster, NS, "job", now=T0.replace(second=5), settings=SETTINGS)
    assert prepared_of(cluster) == ("False", "ServiceCreateRefused")
    refusing.on = False
    reconcile(cluster, NS, "job", now=T0.replace(minute=5), settings=SETTINGS)
    assert prepared_of(cluster) == ("True", "ObjectsCreated") and (NS, "job") in cluster.services
    assert [kind for (_, kind, _) in cluster.others] == ["Secret", "NetworkPolicy"] and refusing.pods_sent == 0


def prepared_of(cluster: FakeCluster) -> tuple[str, str]:
    found = next(c for c in cluster.job_status(NS, "job")["conditions"] if c["type"] == "Prepared")
    return found["status"], found["reason"]
