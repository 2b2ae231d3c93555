"""The metric names a PromQL query selects, and the series the operator's registry exports: what the dashboard's and
the alerts' queries are checked against."""

import re

from trainingjob.runtime.metrics import Metrics

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
