"""The chart's files on their own: its crds/ is the generated CRD, byte for byte, its operator settings are generated
from the operator's settings model, and its JSON files parse."""

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from trainingjob.generate import chart_settings, crd
from trainingjob.settings import OperatorSettings

pytestmark = pytest.mark.fast

CHART = Path(__file__).resolve().parents[2] / "charts" / "trainingjob-operator"
TOP_LEVEL_CRDS = CHART.parents[1] / "crds"


def test_chart_crds_are_a_copy_of_the_top_level_crds() -> None:
    chart = {p.name: p.read_text() for p in (CHART / "crds").glob("*.yaml")}
    top = {p.name: p.read_text() for p in TOP_LEVEL_CRDS.glob("*.yaml")}
    assert chart == top, (
        "charts/trainingjob-operator/crds/ drifted from crds/: cp crds/*.yaml charts/trainingjob-operator/crds/"
    )


def test_chart_crd_is_what_the_model_generates() -> None:
    assert (CHART / "crds" / "trainingjob.io_trainingjobs.yaml").read_text() == crd.render(), (
        "run `make crds` and copy crds/"
    )


@pytest.mark.parametrize("name", ["values.schema.json", "files/dashboard.json"])
def test_json_files_parse(name: str) -> None:
    assert json.loads((CHART / name).read_text())


@pytest.mark.parametrize(
    ("name", "rewrite"),
    [("values.yaml", chart_settings.rewritten_values), ("values.schema.json", chart_settings.rewritten_schema)],
    ids=["values", "schema"],
)
def test_the_charts_operator_settings_are_generated_from_the_operators_own(name: str, rewrite: Any) -> None:
    """Names, defaults, bounds and descriptions come from OperatorSettings alone."""
    text = (CHART / name).read_text()
    assert rewrite(text) == text, f"{name} drifted from OperatorSettings: run `make crds`"


def test_every_operator_setting_is_in_the_charts_settings_or_set_by_another_value() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())["operator"]
    in_chart = {re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower() for key in values["settings"]}
    assert in_chart | set(chart_settings.ELSEWHERE) == set(OperatorSettings.model_fields)
    assert not in_chart & set(chart_settings.ELSEWHERE)
    assert OperatorSettings.model_fields["leader_election"].default == values["leaderElection"]


def test_the_charts_default_trainer_image_is_checked_as_the_operator_checks_it() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    chart = schema["properties"]["operator"]["properties"]["settings"]["properties"]["defaultTrainerImage"]
    field = OperatorSettings.model_json_schema()["properties"]["default_trainer_image"]
    assert (chart["pattern"], chart["maxLength"]) == (field["pattern"], field["maxLength"])
