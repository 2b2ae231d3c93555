"""The Helm chart rendered by helm alone (lint, template; no cluster): strict lint, RBAC without wildcards or
secrets, hardened and probed pods, TLS, namespaced mode, values refused naming the value, and monitoring objects
that query only what the operator exports."""

import base64
import ipaddress
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from kubernetes import client
from pydantic.alias_generators import to_camel
from testbed.helm import Helm, HelmError
from testbed.pki import CertPair
from tests.support.chart import MONITORING, VALUE_SETS, in_namespace, operator_env
from tests.support.https import https
from tests.support.rest_api import SERVER_CLUSTER_RULES, SERVER_JOB_RULES

from trainingjob.generate import chart_settings
from trainingjob.kube.impersonation import SA_EXTRAS
from trainingjob.runtime.metrics import Metrics
from trainingjob.settings import OperatorSettings
from trainingjob_api.settings import SYSTEM_NAMESPACES, ApiSettings
from trainingjob_sdk import Client, TrainingJobError

pytestmark = pytest.mark.tools
Manifest = dict[str, Any]


def _by_kind(objects: list[Manifest]) -> dict[str, list[Manifest]]:
    found: dict[str, list[Manifest]] = {}
    for manifest in objects:
        found.setdefault(manifest["kind"], []).append(manifest)
    return found


def _rules(objects: list[Manifest]) -> list[Manifest]:
    return [rule for m in objects if m["kind"] in ("ClusterRole", "Role") for rule in m["rules"]]


REFUSED = {
    "namespace": ({"operator.watchNamespace": "Team_A"}, "/operator/watchNamespace"),
    "workers": ({"operator.settings.workers": "0"}, "/operator/settings/workers"),
    "backoff": ({"operator.settings.backoffBaseSeconds": "0"}, "/operator/settings/backoffBaseSeconds"),
    "metrics-port": ({"operator.metricsPort": "70000"}, "/operator/metricsPort"),
    "log-level": ({"operator.logLevel": "LOUD"}, "/operator/logLevel"),
    "digest": ({"operator.image.digest": "latest"}, "/operator/image/digest"),
    "removed-api-verbs": ({"api.trainingJobVerbs": "{get,list,watch}"}, "trainingJobVerbs"),
    "service-type": ({"api.service.type": "Headless"}, "/api/service/type"),
    "duration": ({"monitoring.prometheusRule.stuckFor": "soon"}, "/monitoring/prometheusRule/stuckFor"),
    "env-not-a-string": (
        {"operator.extraEnv[0].name": "X", "operator.extraEnv[0].value": "true"},
        "/operator/extraEnv/0/value",
    ),
    "unknown-key": ({"operator.replicaCount": "2"}, "replicaCount"),
    "replicas": ({"operator.replicas": "0"}, "/operator/replicas"),
    "log-format": ({"operator.settings.logFormat": "xml"}, "/operator/settings/logFormat"),
    "trainer-image": (
        {"operator.settings.defaultTrainerImage": "trainer latest"},
        "/operator/settings/defaultTrainerImage",
    ),
    "tls-mode": ({"api.tls.mode": "off"}, "/api/tls/mode"),
    "tls-secret-unnamed": ({"api.tls.mode": "secret"}, "/api/tls/secretName"),
    "tls-issuer-unnamed": ({"api.tls.mode": "certManager"}, "/api/tls/issuerRef"),
}


@pytest.mark.parametrize("values", VALUE_SETS.values(), ids=VALUE_SETS.keys())
def test_lint_strict_passes(helm: Helm, values: dict[str, str]) -> None:
    assert "0 chart(s) failed" in helm.lint(in_namespace("team-a", values))


@pytest.mark.parametrize("values", VALUE_SETS.values(), ids=VALUE_SETS.keys())
def test_rbac_has_no_wildcards_and_never_reads_secrets(helm: Helm, values: dict[str, str]) -> None:
    rules = _rules(helm.template("rel", "tj-system", in_namespace("team-a", values)))
    assert rules
    for rule in rules:
        named = rule.get("resources", []) + rule.get("apiGroups", []) + rule.get("nonResourceURLs", [])
        assert not any("*" in each for each in rule["verbs"] + named), rule
        assert "secrets" not in rule.get("resources", []) or rule["verbs"] == ["create"], rule
        assert not {"escalate", "bind"} & set(rule["verbs"]), rule
        assert "impersonate" not in rule["verbs"] or rule in IMPERSONATION, rule


# Impersonation, the API's only (it writes jobs and reads logs as its caller): never of anything else.
IMPERSONATION = [
    {"apiGroups": [""], "resources": ["users", "groups", "serviceaccounts"], "verbs": ["impersonate"]},
    {
        "apiGroups": ["authentication.k8s.io"],
        "resources": ["uids", *(f"userextras/{key}" for key in SA_EXTRAS)],
        "verbs": ["impersonate"],
    },
]


def _triples(rules: list[Manifest]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule.get("apiGroups", [])
        for resource in rule.get("resources", [])
        for verb in rule["verbs"]
    }


@pytest.mark.parametrize("namespaced", [False, True], ids=["cluster-wide", "namespaced"])
def test_the_api_may_read_jobs_and_write_them_only_as_its_caller(helm: Helm, namespaced: bool) -> None:
    values = {"api.namespaces": "{team-a}"} if namespaced else {}
    objects = helm.template("rel", "tj-system", values)
    api = [o for o in objects if o["metadata"]["name"].endswith("-api")]
    rules = {kind: [r for o in api if o["kind"] == kind for r in o["rules"]] for kind in ("ClusterRole", "Role")}
    job_rules, cluster_rules = (_triples(as_json(r)) for r in (SERVER_JOB_RULES, SERVER_CLUSTER_RULES))
    # The REST API's tests run it with the chart's rights, Roles in the namespaces it serves or cluster-wide.
    if namespaced:
        assert (_triples(rules["Role"]), _triples(rules["ClusterRole"])) == (job_rules, cluster_rules)
    else:
        assert (rules["Role"], _triples(rules["ClusterRole"])) == ([], job_rules | cluster_rules)
    granted = _triples(rules["Role"] + rules["ClusterRole"])
    assert not {t for t in granted if t[0] == "trainingjob.io" and t[2] not in {"get", "list", "watch"}}
    assert ("", "pods/log", "get") not in granted


def as_json(rules: list[Any]) -> list[Manifest]:
    found: list[Manifest] = client.ApiClient().sanitize_for_serialization(rules)
    return found


def test_the_operator_runs_alone_hardened_and_probed(helm: Helm) -> None:
    kinds = _by_kind(helm.template("rel", "tj-system"))
    operator, api = sorted(
        kinds["Deployment"], key=lambda d: d["metadata"]["name"] != "rel-trainingjob-operator-operator"
    )
    assert operator["spec"]["replicas"] == 1 and operator["spec"]["strategy"]["type"] == "RollingUpdate"
    (lease_role,) = [r for r in kinds["Role"] if r["metadata"]["name"].endswith("-leader")]
    assert lease_role["metadata"]["namespace"] == "tj-system" and lease_role["rules"][0]["resources"] == ["leases"]
    alone = _by_kind(helm.template("rel", "tj-system", {"operator.leaderElection": "false", "operator.replicas": "3"}))
    (single,) = [d for d in alone["Deployment"] if d["metadata"]["name"].endswith("-operator")]
    assert single["spec"]["replicas"] == 1 and single["spec"]["strategy"] == {"type": "Recreate"}
    assert "Role" not in alone
    for deployment in (operator, api):
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        (container,) = pod["containers"]
        security = container["securityContext"]
        assert security["allowPrivilegeEscalation"] is False and security["readOnlyRootFilesystem"] is True
        assert security["capabilities"] == {"drop": ["ALL"]}
        assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
        assert container["livenessProbe"] and container["readinessProbe"]
    assert api["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["path"] == "/readyz"
    env = {e["name"]: e["value"] for e in operator["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["TJ_OPERATOR_NAMESPACE"] == "" and env["TJ_OPERATOR_METRICS_PORT"] == "8080"


@pytest.mark.parametrize(
    ("values", "secret", "scheme"),
    [
        pytest.param({}, "rel-trainingjob-operator-api-tls", "HTTPS", id="self-signed"),
        pytest.param({"api.tls.mode": "secret", "api.tls.secretName": "mine"}, "mine", "HTTPS", id="own-secret"),
        pytest.param(
            {"api.tls.mode": "certManager", "api.tls.issuerRef.name": "ca", "api.tls.issuerRef.kind": "ClusterIssuer"},
            "rel-trainingjob-operator-api-tls",
            "HTTPS",
            id="cert-manager",
        ),
        pytest.param({"api.tls.mode": "none"}, None, "HTTP", id="behind-a-proxy"),
    ],
)
def test_the_api_serves_https_unless_told_it_sits_behind_a_proxy(
    helm: Helm, values: dict[str, str], secret: str | None, scheme: str
) -> None:
    kinds = _by_kind(helm.template("rel", "tj-system", values))
    api = next(d for d in kinds["Deployment"] if d["metadata"]["name"].endswith("-api"))
    pod = api["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    mounted = [v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v]
    assert mounted == ([secret] if secret else [])
    assert ("TJ_API_TLS_CERT_FILE" in env, env.get("TJ_API_PLAIN_HTTP")) == (
        (True, None) if secret else (False, "true")
    )
    probes = [pod["containers"][0][p]["httpGet"]["scheme"] for p in ("livenessProbe", "readinessProbe")]
    assert probes == [scheme, scheme]
    made = [s["metadata"]["name"] for s in kinds.get("Secret", []) if _component(s) == "api"]
    made += [c["spec"]["secretName"] for c in kinds.get("Certificate", [])]
    assert made == ([secret] if values.get("api.tls.mode") in (None, "certManager") else [])


def test_an_api_serving_some_namespaces_has_rights_there_only(helm: Helm) -> None:
    kinds = _by_kind(helm.template("rel", "tj-system", {"api.namespaces": "{team-a,team-b}"}))
    api_roles = [r for r in kinds["Role"] if r["metadata"]["name"].endswith("-api")]
    assert sorted(r["metadata"]["namespace"] for r in api_roles) == ["team-a", "team-b"]
    assert all("trainingjobs" in r["rules"][0]["resources"] for r in api_roles)
    (cluster_role,) = [r for r in kinds["ClusterRole"] if r["metadata"]["name"].endswith("-api")]
    assert [r["resources"] for r in cluster_role["rules"][:2]] == [["tokenreviews"], ["subjectaccessreviews"]]
    assert cluster_role["rules"][2:] == IMPERSONATION  # cluster-scoped in Kubernetes: no Role can grant it
    api = next(d for d in kinds["Deployment"] if d["metadata"]["name"].endswith("-api"))
    env = {e["name"]: e.get("value") for e in api["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["TJ_API_NAMESPACES"] == '["team-a","team-b"]' and "TJ_API_EXCLUDED_NAMESPACES" not in env


def test_an_api_serving_every_namespace_leaves_the_clusters_own_out(helm: Helm) -> None:
    api = next(
        d for d in _by_kind(helm.template("rel", "tj-system"))["Deployment"] if d["metadata"]["name"].endswith("-api")
    )
    env = {e["name"]: e.get("value") for e in api["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert ApiSettings(excluded_namespaces=json.loads(env["TJ_API_EXCLUDED_NAMESPACES"])).excluded_namespaces == list(
        SYSTEM_NAMESPACES
    )


def test_fractional_seconds_pass_through_set(helm: Helm) -> None:
    env = operator_env(helm, {"operator.settings.backoffBaseSeconds": "0.5"})
    assert env["TJ_OPERATOR_BACKOFF_BASE_SECONDS"] == "0.5"


def test_images_are_overridable(helm: Helm) -> None:
    values = {
        "operator.image.repository": "r.example/op",
        "operator.image.tag": "v9",
        "api.image.digest": "sha256:" + "b" * 64,
    }
    images = {
        d["metadata"]["name"]: d["spec"]["template"]["spec"]["containers"][0]["image"]
        for d in _by_kind(helm.template("rel", "ns", values))["Deployment"]
    }
    assert images == {
        "rel-trainingjob-operator-operator": "r.example/op:v9",
        "rel-trainingjob-operator-api": "ghcr.io/trainingjob/trainingjob-api@sha256:" + "b" * 64,
    }


def test_namespaced_mode_uses_a_role_in_the_watched_namespace(helm: Helm) -> None:
    objects = helm.template("rel", "tj-system", {"operator.watchNamespace": "team-a", "api.enabled": "false"})
    kinds = _by_kind(objects)
    (role,) = [r for r in kinds["Role"] if not r["metadata"]["name"].endswith("-leader")]
    assert role["metadata"]["namespace"] == "team-a"
    # Of the operator's rights only kopf's namespace and CRD observers, the cluster-scoped objects Kueue's admission
    # names (reads of single objects), and the reviews of who reads /metrics, are cluster-wide (the others are
    # people's).
    (cluster_role,) = [r for r in kinds["ClusterRole"] if r["metadata"]["name"].endswith("-operator")]
    assert [(r["resources"], r["verbs"]) for r in cluster_role["rules"]] == [
        (["namespaces"], ["list", "watch"]),
        (["resourceflavors"], ["get"]),
        (["priorityclasses"], ["get"]),
        (["customresourcedefinitions"], ["list", "watch"]),
        (["tokenreviews"], ["create"]),
        (["subjectaccessreviews"], ["create"]),
    ]
    without_crd_watch = _by_kind(
        helm.template("rel", "tj-system", {"operator.watchNamespace": "team-a", "rbac.watchCRDs": "false"})
    )
    operator_role = next(r for r in without_crd_watch["ClusterRole"] if r["metadata"]["name"].endswith("-operator"))
    assert [r["resources"] for r in operator_role["rules"]] == [
        ["namespaces"],
        ["resourceflavors"],
        ["priorityclasses"],
        ["tokenreviews"],
        ["subjectaccessreviews"],
    ]


@pytest.mark.parametrize(("values", "named"), REFUSED.values(), ids=REFUSED.keys())
def test_invalid_values_are_refused_naming_the_value(helm: Helm, values: dict[str, str], named: str) -> None:
    with pytest.raises(HelmError, match="values don't meet the specifications of the schema") as refused:
        helm.template("rel", "ns", values)
    assert named in str(refused.value)


def test_monitoring_without_metrics_is_refused(helm: Helm) -> None:
    with pytest.raises(HelmError, match=r"set operator\.metricsPort"):
        helm.template("rel", "ns", {"operator.metricsPort": "0", "monitoring.serviceMonitor.enabled": "true"})


def test_alerts_and_dashboard_use_only_metrics_the_operator_exports(helm: Helm) -> None:
    """Structural check of the monitoring objects (no Prometheus here): every trainingjob_* series they query
    is one the operator's registry exposes."""
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}
    exported = {f.name + suffix for f in Metrics().registry.collect() for suffix in suffixes[f.type]}
    kinds = _by_kind(helm.template("rel", "ns", MONITORING))
    rules = kinds["PrometheusRule"][0]["spec"]["groups"][0]["rules"]
    assert {r["alert"] for r in rules} >= {
        "TrainingJobOperatorDown",
        "TrainingJobsStuckPending",
        "TrainingJobsStuckRestarting",
        "TrainingJobRestartStorm",
    }
    assert all(r["labels"]["severity"] and r["annotations"]["summary"] for r in rules)
    dashboard = yaml.safe_load(kinds["ConfigMap"][0]["data"]["trainingjob-operator.json"])
    queries = [r["expr"] for r in rules] + [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = {word for q in queries for word in _words(q) if word.startswith("trainingjob_")}
    assert used and used <= exported, used - exported
    assert {"trainingjob_jobs", "trainingjob_restarts_total", "trainingjob_queue_depth"} <= used


def _words(query: str) -> list[str]:
    return "".join(c if c.isalnum() or c == "_" else " " for c in query).split()


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


def _component(manifest: dict[str, Any]) -> str:
    return str(manifest["metadata"].get("labels", {}).get("app.kubernetes.io/component", ""))


def test_the_operator_gets_a_key_of_its_own_to_sign_its_orders(helm: Helm) -> None:
    kinds = _by_kind(helm.template("rel", "tj-system", {}))
    operator = next(d for d in kinds["Deployment"] if d["metadata"]["name"].endswith("-operator"))
    pod = operator["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "operator-key")
    assert env["TJ_OPERATOR_KEY_FILE"] == f"{mount['mountPath']}/key" and mount["readOnly"] is True
    (key,) = [s for s in kinds["Secret"] if s["metadata"]["name"] == secrets["operator-key"]]
    assert len(base64.b64decode(key["data"]["key"])) >= 32 and _component(key) == "operator"
