"""Every query of the Grafana dashboard names only metrics the operator exports (read from its registry), and the
dashboard has the per-job panels. The alert rules' queries, rendered by helm, are checked in test_alerts.py."""

import json
import re
from typing import Any

import pytest
from testbed.helm import CHART
from tests.support.promql import PROMETHEUS_SERIES, exported, metric_names

pytestmark = pytest.mark.fast
DASHBOARD = CHART / "files" / "dashboard.json"


def panel_queries() -> list[str]:
    document = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in document["panels"] for t in p.get("targets", [])]


def variable_queries() -> list[str]:
    """The series selectors of the query variables (label_values(SELECTOR, LABEL))."""
    document = json.loads(DASHBOARD.read_text())
    queries = [v["query"] for v in document["templating"]["list"] if v["type"] == "query"]
    return [re.sub(r"^label_values\((.*),\s*\w+\)$", r"\1", q) for q in queries]


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ('sum by (le) (rate(a_bucket{x="b{c}", y=~"$v"}[5m])) > bool 3', {"a_bucket"}),
        ('time() - b{namespace=~"${ns:regex}"} > 900 and on (namespace, job) c == 1', {"b", "c"}),
        (
            'sum without (failure_class) (d{failure_class!="x"}) / e >= 0.8 unless ignoring(x) f offset 5m',
            {"d", "e", "f"},
        ),
        ("histogram_quantile(0.99, g[1h:5m]) * 1e3 + up", {"g", "up"}),
        ('absent(up{job="j"} == 1)', {"up"}),
        ("max(h) by (x) or vector(0)", {"h"}),
    ],
)
def test_metric_names_are_read_from_promql(query: str, names: set[str]) -> None:
    assert metric_names(query) == names


def test_every_dashboard_query_names_exported_metrics() -> None:
    used = {name for query in panel_queries() + variable_queries() for name in metric_names(query)}
    assert used and used <= exported() | PROMETHEUS_SERIES, used - exported()


def test_the_dashboard_has_per_job_panels_filtered_by_namespace_and_job() -> None:
    document: dict[str, Any] = json.loads(DASHBOARD.read_text())
    variables = {v["name"] for v in document["templating"]["list"]}
    assert {"datasource", "operator_namespace", "namespace", "trainingjob"} <= variables
    per_job = [q for q in panel_queries() if "trainingjob_job_" in q]
    assert all('namespace=~"$namespace"' in q and 'trainingjob=~"$trainingjob"' in q for q in per_job), per_job
    used = {name for query in per_job for name in metric_names(query)}
    wanted = {"step", "loss", "samples_per_second", "attempt", "restarts", "last_heartbeat_timestamp_seconds", "phase"}
    wanted |= {"goodput_ratio", "time_seconds"}
    assert {f"trainingjob_job_{name}" for name in wanted} <= used
    ids = [p["id"] for p in document["panels"]]
    assert len(ids) == len(set(ids))
