"""Who the chart lets read /metrics (helm template alone): the operator may ask TokenReview and SubjectAccessReview
(it serves /metrics only to callers allowed `get /metrics`), the chart's metrics-reader ClusterRole grants exactly
that path, monitoring.scrapers are bound to it, and the ServiceMonitor sends Prometheus' token. Whether the
apiserver agrees is tests/integration/test_metrics_access.py."""

from typing import Any

import pytest
from testbed.helm import Helm

pytestmark = pytest.mark.tools
Manifest = dict[str, Any]
READER = "rel-trainingjob-operator-metrics-reader"
PROMETHEUS = {"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}
SCRAPER = {f"monitoring.scrapers[0].{key}": value for key, value in PROMETHEUS.items()}


def named(objects: list[Manifest], kind: str, name: str) -> Manifest | None:
    return next((m for m in objects if m["kind"] == kind and m["metadata"]["name"] == name), None)


def test_the_metrics_reader_role_grants_get_on_metrics_only(helm: Helm) -> None:
    role = named(helm.template("rel", "tj-system"), "ClusterRole", READER)
    assert role is not None and role["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]


def test_scrapers_are_bound_to_the_metrics_reader_and_only_they(helm: Helm) -> None:
    assert named(helm.template("rel", "tj-system"), "ClusterRoleBinding", READER) is None
    binding = named(helm.template("rel", "tj-system", SCRAPER), "ClusterRoleBinding", READER)
    assert binding is not None and binding["subjects"] == [PROMETHEUS]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": READER}


def test_the_operator_may_review_tokens_while_it_serves_metrics(helm: Helm) -> None:
    def reviews(values: dict[str, str]) -> list[str]:
        objects = helm.template("rel", "tj-system", values)
        role = named(objects, "ClusterRole", "rel-trainingjob-operator-operator")
        assert role is not None
        return [r["resources"][0] for r in role["rules"] if r["resources"][0].endswith("reviews")]

    assert reviews({}) == ["tokenreviews", "subjectaccessreviews"]
    assert reviews({"operator.metricsPort": "0"}) == []
    assert named(helm.template("rel", "tj-system", {"operator.metricsPort": "0"}), "ClusterRole", READER) is None


def test_the_service_monitor_sends_prometheus_own_token(helm: Helm) -> None:
    monitor = named(
        helm.template("rel", "tj-system", {"monitoring.serviceMonitor.enabled": "true"}),
        "ServiceMonitor",
        "rel-trainingjob-operator-operator",
    )
    assert monitor is not None
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
