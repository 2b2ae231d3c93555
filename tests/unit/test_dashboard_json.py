"""Every query of the Grafana dashboard and of the alert rules names only metrics the operator exports (read from
its registry), and the dashboard has the per-job panels. The rules are the chart's, rendered by helm."""

import json
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from tests.support.helm import CHART, Helm

from trainingjob.runtime.metrics import Metrics

DASHBOARD = CHART / "files" / "dashboard.json"
# Series Prometheus makes itself, not the operator.
PROMETHEUS_SERIES = {"up"}
# PromQL words that are not metric names: keywords, binary operators written as words, special numbers.
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset"}
KEYWORDS |= {"inf", "nan", "atan2"}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_OFFSET = re.compile(r"\boffset\s+-?[0-9a-z]+")
_VARIABLE = re.compile(r"\$\{[^}]*\}|\$\w+")
_NUMBER = re.compile(r"(?<![\w:])(?:0x[0-9a-f]+|[0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)", re.IGNORECASE)
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def metric_names(query: str) -> set[str]:
    """The metric names a PromQL query (Grafana's variables allowed) selects: what is left once strings, label
    matchers, ranges, grouping labels, variables, numbers, function calls and keywords are taken out."""
    for pattern in (_STRING, _VARIABLE, _MATCHERS, _RANGE, _GROUPING, _OFFSET, _NUMBER):
        query = pattern.sub(" ", query)
    names = set()
    for found in _NAME.finditer(query):
        called = query[found.end() :].lstrip().startswith("(")
        if not called and found.group().lower() not in KEYWORDS:
            names.add(found.group())
    return names


def exported() -> set[str]:
    """Every series name the operator's registry exposes, with the suffixes its metric types add."""
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
    return {f.name + suffix for f in Metrics().registry.collect() for suffix in suffixes[f.type]}


def panel_queries() -> list[str]:
    document = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in document["panels"] for t in p.get("targets", [])]


def variable_queries() -> list[str]:
    """The series selectors of the query variables (label_values(SELECTOR, LABEL))."""
    document = json.loads(DASHBOARD.read_text())
    queries = [v["query"] for v in document["templating"]["list"] if v["type"] == "query"]
    return [re.sub(r"^label_values\((.*),\s*\w+\)$", r"\1", q) for q in queries]


def rule_queries() -> list[str]:
    with tempfile.TemporaryDirectory(prefix="tj-helm-") as home:
        values = {"monitoring.prometheusRule.enabled": "true"}
        (rule,) = Helm(Path(home)).template("tj", "monitoring", values, show_only=["templates/monitoring.yaml"])
    return [r["expr"] for group in rule["spec"]["groups"] for r in group["rules"]]


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


def test_every_alert_names_exported_metrics() -> None:
    used = {name for query in rule_queries() for name in metric_names(query)}
    assert used and used <= exported() | PROMETHEUS_SERIES, used - exported()
    assert "up" in used  # the operator-down alert


def test_the_dashboard_has_per_job_panels_filtered_by_namespace_and_job() -> None:
    document: dict[str, Any] = json.loads(DASHBOARD.read_text())
    variables = {v["name"] for v in document["templating"]["list"]}
    assert {"datasource", "operator_namespace", "namespace", "trainingjob"} <= variables
    per_job = [q for q in panel_queries() if "trainingjob_job_" in q]
    assert all('namespace=~"$namespace"' in q and 'trainingjob=~"$trainingjob"' in q for q in per_job), per_job
    used = {name for query in per_job for name in metric_names(query)}
    wanted = {"step", "loss", "samples_per_second", "attempt", "restarts", "last_heartbeat_timestamp_seconds", "phase"}
    assert {f"trainingjob_job_{name}" for name in wanted} <= used
    ids = [p["id"] for p in document["panels"]]
    assert len(ids) == len(set(ids))
