"""Who may read /metrics, as a real apiserver decides it: the operator's Gate (TokenReview, then a
SubjectAccessReview of `get /metrics`), asked with exactly the chart's operator RBAC, lets through Prometheus' token
once its account is listed in monitoring.scrapers (bound to the chart's metrics-reader ClusterRole), and nobody else:
no token, a forged one, one minted for another audience, a tenant who may do anything to jobs. The REST
API's /metrics asks the same questions (tests/integration/rest/test_health.py)."""

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from testbed.controlplane import ControlPlane
from testbed.helm import Helm
from tests.support.chart import ChartIdentity
from tests.support.rest_api import grant, service_account

from trainingjob.kube.client import connect
from trainingjob.kube.reviews import METRICS, Gate, Refusal, ReviewClients
from trainingjob.model import GROUP, PLURAL

pytestmark = pytest.mark.envtest
PROMETHEUS = "prometheus"


@pytest.fixture(scope="module")
def monitoring(envtest: ControlPlane) -> Iterator[str]:
    """The namespace of the monitoring system, holding Prometheus' ServiceAccount."""
    with envtest.api_client() as api:
        core = client.CoreV1Api(api)
        core.create_namespace(client.V1Namespace(metadata={"name": "monitoring-test"}))
        yield "monitoring-test"
        core.delete_namespace("monitoring-test")


@pytest.fixture(scope="module")
def gate(envtest: ControlPlane, helm: Helm, monitoring: str) -> Iterator[Gate]:
    """The operator's Gate, asking with the chart's operator identity, the chart rendered with Prometheus' account
    in monitoring.scrapers."""
    scrapers = {"kind": "ServiceAccount", "name": PROMETHEUS, "namespace": monitoring}
    values = {f"monitoring.scrapers[0].{key}": value for key, value in scrapers.items()}
    with tempfile.TemporaryDirectory(prefix="tj-metrics-access-") as folder:
        identity = ChartIdentity(envtest, helm, Path(folder), values)
        try:
            with connect(identity.kubeconfig).api as api:
                yield Gate.of(ReviewClients.of(api, 10.0), ttl=0)
        finally:
            identity.remove()


def bearer(token: str) -> str:
    return f"Bearer {token}"


def test_prometheus_bound_by_the_chart_reads_metrics(envtest: ControlPlane, gate: Gate, monitoring: str) -> None:
    with envtest.api_client() as admin:
        token = service_account(admin, monitoring, PROMETHEUS, audience=None)  # as mounted in its pod
    assert gate.refusal(bearer(token), METRICS) is None


def test_a_token_for_another_audience_is_not_accepted(envtest: ControlPlane, gate: Gate, monitoring: str) -> None:
    """Prometheus' account, but a token minted for the REST API: not one Kubernetes takes for itself."""
    with envtest.api_client() as admin:
        token = service_account(admin, monitoring, PROMETHEUS, audience="trainingjob-api")
    refusal = gate.refusal(bearer(token), METRICS)
    assert refusal is not None and refusal.status == 401


def test_a_tenant_with_every_right_on_jobs_reads_no_metrics(envtest: ControlPlane, gate: Gate, envtest_ns: str) -> None:
    rules = [client.V1PolicyRule(api_groups=[GROUP], resources=[PLURAL], verbs=["*"])]
    with envtest.api_client() as admin:
        grant(admin, "tenant", (envtest_ns, "tenant"), rules, namespace=envtest_ns)
        token = service_account(admin, envtest_ns, "tenant", audience=None)
    assert gate.refusal(bearer(token), METRICS) == Refusal(
        403, f'user "system:serviceaccount:{envtest_ns}:tenant" cannot get path "/metrics"'
    )


@pytest.mark.parametrize(
    "authorization",
    [
        pytest.param(None, id="no header"),
        pytest.param("", id="an empty header"),
        pytest.param("Bearer ", id="no token"),
        pytest.param("Bearer forged.token.value", id="a forged token"),
        pytest.param("Basic cHJvbWV0aGV1czpzZWNyZXQ=", id="basic credentials"),
    ],
)
def test_strangers_are_not_accepted(gate: Gate, authorization: str | None) -> None:
    refusal = gate.refusal(authorization, METRICS)
    assert refusal is not None and refusal.status == 401
