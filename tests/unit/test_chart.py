"""The chart's files on their own: its crds/ is the generated CRD, byte for byte, and its JSON files parse."""

import json
import re
from pathlib import Path

import pytest
import yaml

from trainingjob import crd
from trainingjob.settings import OperatorSettings

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


def test_the_charts_operator_settings_default_to_the_operators_own() -> None:
    """One default per setting: the chart's values.yaml agrees with OperatorSettings (readProgress included)."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())["operator"]
    defaults = OperatorSettings.model_fields
    for name, value in values["settings"].items():
        field = re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
        assert defaults[field].default == value, (
            f"operator.settings.{name}: chart {value!r}, operator {defaults[field].default!r}"
        )
    assert defaults["leader_election"].default == values["leaderElection"]


def test_the_charts_default_trainer_image_is_checked_as_the_operator_checks_it() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    chart = schema["properties"]["operator"]["properties"]["settings"]["properties"]["defaultTrainerImage"]
    field = OperatorSettings.model_json_schema()["properties"]["default_trainer_image"]
    assert (chart["pattern"], chart["maxLength"]) == (field["pattern"], field["maxLength"])
