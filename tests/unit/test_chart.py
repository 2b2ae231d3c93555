"""The chart's files on their own: its crds/ is the generated CRD, byte for byte, its operator settings are generated
from the operator's settings model, its JSON files parse, and the API certificate it generates serves a
port-forward."""

import base64
import ipaddress
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from pydantic.alias_generators import to_camel
from tests.support.helm import Helm
from tests.support.pki import CertPair
from tests.unit.test_sdk_rest_tls import https

from trainingjob.generate import chart_settings, crd
from trainingjob.settings import OperatorSettings
from trainingjob_sdk import Client, TrainingJobError

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


def test_each_chart_setting_reaches_the_operator_as_its_own_variable(tmp_path: Path) -> None:
    """helm's snakecase of the key is the operator's variable: set every setting to a non-default value and read
    the rendered Deployment's environment back through OperatorSettings."""
    changed = {"backoffBaseSeconds": "0.5", "workers": "3", "readProgress": "false", "logFormat": "json",
               "defaultTrainerImage": "registry.example/trainer:9", "leaseRenewSeconds": "1.5"}  # fmt: skip
    assert set(changed) < {to_camel(n) for n in chart_settings.chart_fields()}
    values = {f"operator.settings.{key}": value for key, value in changed.items()}
    (deployment,) = Helm(tmp_path).template("tj", "ops", values, show_only=["templates/operator-deployment.yaml"])
    env = {e["name"]: e["value"] for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    names = {chart_settings.env_name(name) for name in chart_settings.chart_fields()}
    assert names <= set(env), names - set(env)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        read = OperatorSettings()
    assert (read.backoff_base_seconds, read.workers, read.read_progress, read.log_format) == (0.5, 3, False, "json")
    assert (read.default_trainer_image, read.lease_renew_seconds) == ("registry.example/trainer:9", 1.5)


def test_the_charts_default_trainer_image_is_checked_as_the_operator_checks_it() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    chart = schema["properties"]["operator"]["properties"]["settings"]["properties"]["defaultTrainerImage"]
    field = OperatorSettings.model_json_schema()["properties"]["default_trainer_image"]
    assert (chart["pattern"], chart["maxLength"]) == (field["pattern"], field["maxLength"])


def test_the_generated_api_certificate_names_the_port_forwards_hosts_too(tmp_path: Path) -> None:
    """The self-signed certificate names the Service and, for `kubectl port-forward`, localhost and 127.0.0.1:
    tjctl and the SDK given its ca.crt reach the API at https://127.0.0.1:PORT and https://localhost:PORT."""
    (secret,) = Helm(tmp_path).template("tj", "ops", show_only=["templates/api-tls.yaml"])
    files = {name: base64.b64decode(value) for name, value in secret["data"].items()}
    certificate = x509.load_pem_x509_certificate(files["tls.crt"])
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    service = "tj-trainingjob-operator-api"
    assert set(names.get_values_for_type(x509.DNSName)) == {
        service,
        f"{service}.ops",
        f"{service}.ops.svc",
        "localhost",
    }
    assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
    with https(CertPair(tmp_path / "tls.crt", tmp_path / "tls.key")) as server:
        for url in (server, server.replace("127.0.0.1", "localhost")):
            with (
                Client.rest(url, "token", cacert=tmp_path / "ca.crt") as client,
                pytest.raises(TrainingJobError) as got,
            ):
                client.list()
            assert got.value.status == 418, got.value  # past TLS: the server's own answer
