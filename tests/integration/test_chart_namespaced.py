"""The chart's namespaced mode (operator.watchNamespace): the operator runs a job under a Role in that namespace.

A module of its own so that no cluster-wide operator (test_chart.py, test_operator.py) runs at the same time."""

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from testbed.controlplane import ControlPlane
from testbed.crds import install_crd
from testbed.harness import Harness
from testbed.helm import Helm
from testbed.operator import OperatorProcess
from tests.support.builders import job_manifest
from tests.support.chart import ChartIdentity, refusals

pytestmark = pytest.mark.cluster


@pytest.fixture
def namespaced_operator(cluster: ControlPlane, cluster_ns: str) -> Iterator[tuple[ChartIdentity, OperatorProcess]]:
    with cluster.api_client() as api:
        install_crd(api)
    with tempfile.TemporaryDirectory(prefix="tj-chart-ns-") as folder:
        identity = ChartIdentity(cluster, Helm(Path(folder)), Path(folder), {"operator.watchNamespace": cluster_ns})
        process = OperatorProcess(
            identity.kubeconfig,
            Path(folder),
            TJ_OPERATOR_NAMESPACE=cluster_ns,
            TJ_OPERATOR_LEASE_NAMESPACE=identity.namespace,
        )
        process.start()
        try:
            yield identity, process
        finally:
            process.stop()
            identity.remove()


def test_a_namespaced_operator_runs_a_job_with_a_role_only(
    cluster: ControlPlane, cluster_ns: str, namespaced_operator: tuple[ChartIdentity, OperatorProcess]
) -> None:
    identity, process = namespaced_operator
    kinds = {m["kind"] for m in identity.objects}
    assert {"Role", "RoleBinding"} <= kinds
    with cluster.api_client() as api:
        h = Harness(api, cluster_ns, process)
        h.create(job_manifest("scoped"))
        for pod in h.wait_running_pods("scoped", 2, attempt=1):
            h.finish(pod.metadata.name, 0)
        h.wait_phase("scoped", "Succeeded")
    assert not refusals(process), "\n".join(refusals(process)[:20])
    with (  # the same identity has no pod rights elsewhere
        cluster.api_client(identity.kubeconfig) as api,
        pytest.raises(client.ApiException) as refused,
    ):
        client.CoreV1Api(api).list_namespaced_pod("default")
    assert refused.value.status == 403
