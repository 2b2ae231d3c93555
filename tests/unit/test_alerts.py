"""The chart's alert rules (files/alerts.yaml, rendered by helm as the chart installs them) pass `promtool check
rules`, and the promtool unit tests of tests/monitoring/ pass; every alert has a test in which it fires and names
only metrics the operator exports.

Needs promtool ($TJ_PROMTOOL, built by `make promtool`: scripts/build-promtool.sh prints its path) and helm
($TJ_CONTROLPLANE_BIN); a missing binary fails these tests, it never skips them."""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from testbed.helm import Helm
from tests.support.promql import PROMETHEUS_SERIES, exported, metric_names

pytestmark = pytest.mark.tools
TESTS = Path(__file__).resolve().parents[1] / "monitoring"
# The release the promtool tests are written for: its metrics Service is tj-trainingjob-operator-operator-metrics.
RELEASE, NAMESPACE = "tj", "monitoring"
Rules = dict[str, Any]


@pytest.fixture(scope="module")
def promtool() -> Path:
    path = Path(os.environ.get("TJ_PROMTOOL", ""))
    if not path.is_file():
        pytest.fail(
            f"promtool not found (TJ_PROMTOOL={os.environ.get('TJ_PROMTOOL', '')!r}): run `make promtool`, or set "
            "TJ_PROMTOOL to the path `bash scripts/build-promtool.sh` prints"
        )
    return path


def rendered_rules(values: dict[str, str] | None = None) -> Rules:
    """The PrometheusRule's spec (a Prometheus rule file: its groups) as the chart renders it."""
    values = {"monitoring.prometheusRule.enabled": "true", **(values or {})}
    with tempfile.TemporaryDirectory(prefix="tj-helm-") as home:
        (rule,) = Helm(Path(home)).template(RELEASE, NAMESPACE, values, show_only=["templates/monitoring.yaml"])
    spec: Rules = rule["spec"]
    return spec


def alerts(rules: Rules) -> dict[str, Any]:
    return {rule["alert"]: rule for group in rules["groups"] for rule in group["rules"]}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The rendered rules as alerts.yaml beside copies of the promtool test files (which name it)."""
    folder = tmp_path_factory.mktemp("alerts")
    (folder / "alerts.yaml").write_text(yaml.safe_dump(rendered_rules(), sort_keys=False))
    for test in TESTS.glob("*.test.yaml"):
        shutil.copy(test, folder / test.name)
    return folder


def run(promtool: Path, workdir: Path, *args: str) -> str:
    done = subprocess.run([str(promtool), *args], cwd=workdir, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"promtool {' '.join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}"
    return done.stdout + done.stderr


def test_promtool_accepts_the_rules(promtool: Path, workdir: Path) -> None:
    out = run(promtool, workdir, "check", "rules", "alerts.yaml")
    assert f"SUCCESS: {len(alerts(rendered_rules()))} rules found" in out


def test_the_promtool_unit_tests_pass(promtool: Path, workdir: Path) -> None:
    tests = sorted(p.name for p in workdir.glob("*.test.yaml"))
    assert tests
    out = run(promtool, workdir, "test", "rules", *tests)
    assert out.count("SUCCESS") == len(tests) and "FAILED" not in out


def test_every_alert_has_a_unit_test_that_fires_it() -> None:
    fired, named = set(), set()
    for path in TESTS.glob("*.test.yaml"):
        for case in yaml.safe_load(path.read_text())["tests"]:
            for check in case.get("alert_rule_test", []):
                named.add(check["alertname"])
                if check.get("exp_alerts"):
                    fired.add(check["alertname"])
    defined = set(alerts(rendered_rules()))
    assert defined <= fired, f"alerts without a test in which they fire: {sorted(defined - fired)}"
    assert named <= defined, f"tests of alerts that do not exist: {sorted(named - defined)}"


def test_every_alert_has_a_severity_and_a_summary() -> None:
    for name, rule in alerts(rendered_rules()).items():
        assert rule["labels"]["severity"] in ("warning", "critical"), name
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], name


def test_the_values_reach_the_rules() -> None:
    values = {
        "monitoring.prometheusRule.stuckFor": "1h",
        "monitoring.prometheusRule.stalledSeconds": "120",
        "monitoring.prometheusRule.restartBudgetRatio": "0.5",
        "monitoring.prometheusRule.restartStormThreshold": "3",
        "monitoring.prometheusRule.queueDepthThreshold": "7",
    }
    found = alerts(rendered_rules(values))
    assert found["TrainingJobsStuckPending"]["for"] == found["TrainingJobsStuckRestarting"]["for"] == "1h"
    assert " > 120 and on " in found["TrainingJobStalled"]["expr"]
    assert " >= 0.5 unless on " in found["TrainingJobRestartBudgetBurning"]["expr"]
    assert found["TrainingJobRestartStorm"]["expr"].endswith("> 3")
    assert found["TrainingJobReconcileBacklog"]["expr"].endswith("> 7")


def test_every_alert_names_exported_metrics() -> None:
    queries = [rule["expr"] for group in rendered_rules()["groups"] for rule in group["rules"]]
    used = {name for query in queries for name in metric_names(query)}
    assert used and used <= exported() | PROMETHEUS_SERIES, used - exported()
    assert "up" in used  # the operator-down alert
