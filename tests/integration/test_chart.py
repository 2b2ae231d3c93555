"""The Helm chart: lint, schema, every rendered object accepted by a real apiserver, install/uninstall, and the
operator running under exactly the chart's RBAC through real job lifecycles."""

import json
import tempfile
import time
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.dynamic import DynamicClient
from tests.builders import SWEEP_PARAMETERS, job_manifest, sweep_manifest
from tests.integration.conftest import install_crd
from tests.support.controlplane import ControlPlane
from tests.support.harness import Harness, condition, progress_endpoint
from tests.support.helm import Helm, HelmError
from tests.support.operator import OperatorProcess, operator_running
from tests.support.processes import poll_until

from trainingjob.generate import crd
from trainingjob.model import GROUP, VERSION
from trainingjob.model.sweep import SWEEP_PLURAL
from trainingjob.runtime.metrics import Metrics

Manifest = dict[str, Any]
OPERATOR_RBAC = ("templates/operator-serviceaccount.yaml", "templates/operator-rbac.yaml")
TRAINER_IMAGE = "registry.example/team/trainer:2"  # operator.settings.defaultTrainerImage of the cluster tier
IDENTITY_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
MONITORING = {
    "monitoring.serviceMonitor.enabled": "true",
    "monitoring.prometheusRule.enabled": "true",
    "monitoring.grafanaDashboard.enabled": "true",
}
VALUE_SETS = {
    "defaults": {},
    "no-api": {"api.enabled": "false"},
    "api-serving-one-namespace": {"api.namespaces": "{{ns}}"},
    "monitoring": MONITORING,
    "no-metrics": {"operator.metricsPort": "0"},
    "read-only-api-pinned-images": {
        "api.trainingJobVerbs": "{get,list,watch}",
        "operator.image.digest": "sha256:" + "a" * 64,
        "api.image.tag": "1.2.3",
        "operator.extraEnv[0].name": "TJ_OPERATOR_READ_PROGRESS",
        "operator.extraEnv[0].value": "yes",  # overrides the default, not a duplicate
    },
    "external-service-accounts": {
        "operator.serviceAccount.create": "false",
        "operator.serviceAccount.name": "default",
        "api.serviceAccount.create": "false",
        "api.serviceAccount.name": "default",
        "rbac.watchCRDs": "false",
    },
    "namespaced": {"operator.watchNamespace": "{ns}"},
}


def _in(namespace: str, values: dict[str, str]) -> dict[str, str]:
    """The values with the placeholder {ns} replaced by `namespace`."""
    return {key: value.replace("{ns}", namespace) for key, value in values.items()}


@pytest.fixture(scope="module")
def helm() -> Iterator[Helm]:
    with tempfile.TemporaryDirectory(prefix="tj-helm-") as home:
        yield Helm(Path(home))


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
    "wildcard-verb": ({"api.trainingJobVerbs": "{*}"}, "/api/trainingJobVerbs/0"),
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


# --- rendering alone ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("values", VALUE_SETS.values(), ids=VALUE_SETS.keys())
def test_lint_strict_passes(helm: Helm, values: dict[str, str]) -> None:
    assert "0 chart(s) failed" in helm.lint(_in("team-a", values))


@pytest.mark.parametrize("values", VALUE_SETS.values(), ids=VALUE_SETS.keys())
def test_rbac_has_no_wildcards_and_never_reads_secrets(helm: Helm, values: dict[str, str]) -> None:
    rules = _rules(helm.template("rel", "tj-system", _in("team-a", values)))
    assert rules
    for rule in rules:
        assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], rule
        assert "secrets" not in rule["resources"] or rule["verbs"] == ["create"], rule
        assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), rule


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
    made = [s["metadata"]["name"] for s in kinds.get("Secret", [])]
    made += [c["spec"]["secretName"] for c in kinds.get("Certificate", [])]
    assert made == ([secret] if values.get("api.tls.mode") in (None, "certManager") else [])


def test_an_api_serving_some_namespaces_has_rights_there_only(helm: Helm) -> None:
    kinds = _by_kind(helm.template("rel", "tj-system", {"api.namespaces": "{team-a,team-b}"}))
    api_roles = [r for r in kinds["Role"] if r["metadata"]["name"].endswith("-api")]
    assert sorted(r["metadata"]["namespace"] for r in api_roles) == ["team-a", "team-b"]
    assert all("trainingjobs" in r["rules"][0]["resources"] for r in api_roles)
    (cluster_role,) = [r for r in kinds["ClusterRole"] if r["metadata"]["name"].endswith("-api")]
    assert [r["resources"] for r in cluster_role["rules"]] == [["tokenreviews"], ["subjectaccessreviews"]]
    api = next(d for d in kinds["Deployment"] if d["metadata"]["name"].endswith("-api"))
    env = {e["name"]: e.get("value") for e in api["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["TJ_API_NAMESPACES"] == '["team-a","team-b"]'


def operator_env(helm: Helm, values: dict[str, str]) -> dict[str, str]:
    """The operator container's environment as the chart renders it with these values."""
    (deployment,) = helm.template("rel", "ns", values, show_only=["templates/operator-deployment.yaml"])
    return {e["name"]: e["value"] for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}


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
    # Of the operator's rights only kopf's namespace and CRD observers are cluster-wide (the others are people's).
    (cluster_role,) = [r for r in kinds["ClusterRole"] if r["metadata"]["name"].endswith("-operator")]
    assert [r["resources"] for r in cluster_role["rules"]] == [["namespaces"], ["customresourcedefinitions"]]
    assert all(r["verbs"] == ["list", "watch"] for r in cluster_role["rules"])
    without_crd_watch = _by_kind(
        helm.template("rel", "tj-system", {"operator.watchNamespace": "team-a", "rbac.watchCRDs": "false"})
    )
    operator_role = next(r for r in without_crd_watch["ClusterRole"] if r["metadata"]["name"].endswith("-operator"))
    assert [r["resources"] for r in operator_role["rules"]] == [["namespaces"]]


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


# --- the envtest tier: the real apiserver judges every object -----------------------------------------------------

MONITORING_STAND_INS = ("ServiceMonitor", "PrometheusRule")


def _stand_in_crd(kind: str) -> Manifest:
    """A minimal monitoring.coreos.com CRD that accepts any spec: the real ones are not installed here."""
    plural = kind.lower() + "s"
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.monitoring.coreos.com"},
        "spec": {
            "group": "monitoring.coreos.com",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                        }
                    },
                }
            ],
        },
    }


def _served(dynamic: DynamicClient, kind: str) -> object:
    return dynamic.resources.get(api_version="monitoring.coreos.com/v1", kind=kind)


@pytest.fixture(scope="module")
def apiserver(envtest: ControlPlane) -> Iterator[client.ApiClient]:
    """The envtest admin, with the TrainingJob CRD and stand-in monitoring CRDs installed and established."""
    with envtest.api_client() as api:
        install_crd(api)
        extensions = client.ApiextensionsV1Api(api)
        for kind in MONITORING_STAND_INS:
            try:
                extensions.create_custom_resource_definition(_stand_in_crd(kind))
            except client.ApiException as error:
                if error.status != 409:
                    raise
        dynamic = DynamicClient(api)
        for kind in MONITORING_STAND_INS:
            poll_until(partial(_served, dynamic, kind), timeout=30, what=f"{kind} served")
        yield api


@pytest.mark.envtest
@pytest.mark.parametrize("values", VALUE_SETS.values(), ids=VALUE_SETS.keys())
def test_every_rendered_object_is_accepted_by_the_apiserver(
    helm: Helm, apiserver: client.ApiClient, envtest_ns: str, values: dict[str, str]
) -> None:
    """Server-side dry run with strict field validation: unknown or misplaced fields fail, not only bad YAML."""
    objects = helm.template(f"r{uuid.uuid4().hex[:6]}", envtest_ns, _in(envtest_ns, values), include_crds=True)
    dynamic = DynamicClient(apiserver)
    for manifest in objects:
        resource = dynamic.resources.get(api_version=manifest["apiVersion"], kind=manifest["kind"])
        namespace = manifest["metadata"].get("namespace") if resource.namespaced else None
        try:
            dynamic.server_side_apply(
                resource,
                body=manifest,
                namespace=namespace,
                field_manager="test-chart",
                dry_run="All",
                query_params=[("fieldValidation", "Strict")],
            )
        except client.ApiException as error:
            pytest.fail(f"{manifest['kind']} {manifest['metadata']['name']} refused: {error.status} {error.body}")


@pytest.mark.envtest
def test_install_then_uninstall(
    helm: Helm, apiserver: client.ApiClient, envtest: ControlPlane, envtest_ns: str
) -> None:
    release = f"r{uuid.uuid4().hex[:6]}"
    notes = helm.install(release, envtest_ns, envtest.kubeconfig, MONITORING)
    assert "kubectl get tj" in notes and "kubectl apply" in notes
    expected = helm.template(release, envtest_ns, MONITORING)
    dynamic = DynamicClient(apiserver)

    def present(manifest: Manifest) -> bool:
        resource = dynamic.resources.get(api_version=manifest["apiVersion"], kind=manifest["kind"])
        namespace = manifest["metadata"].get("namespace") if resource.namespaced else None
        try:
            dynamic.get(resource, name=manifest["metadata"]["name"], namespace=namespace)
        except client.ApiException as error:
            if error.status == 404:
                return False
            raise
        return True

    assert len(expected) >= 12
    missing = [f"{m['kind']}/{m['metadata']['name']}" for m in expected if not present(m)]
    assert not missing
    assert client.ApiextensionsV1Api(apiserver).read_custom_resource_definition("trainingjobs.trainingjob.io")
    helm.uninstall(release, envtest_ns, envtest.kubeconfig)
    left = [f"{m['kind']}/{m['metadata']['name']}" for m in expected if present(m)]
    assert not left
    # the CRD (and so every user's TrainingJobs) survives an uninstall, as helm does for crds/
    assert client.ApiextensionsV1Api(apiserver).read_custom_resource_definition("trainingjobs.trainingjob.io")


# --- the cluster tier: the real operator under the chart's ServiceAccount -----------------------------------------


def _bearer_kubeconfig(path: Path, plane: ControlPlane, token: str) -> Path:
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "trainingjob",
                "cluster": {"server": plane.server_url, "certificate-authority": str(plane.pki.cert)},
            }
        ],
        "users": [{"name": "operator", "user": {"token": token}}],
        "contexts": [{"name": "operator", "context": {"cluster": "trainingjob", "user": "operator"}}],
        "current-context": "operator",
    }
    path.write_text(yaml.safe_dump(document))
    return path


class ChartIdentity:
    """A ServiceAccount of the chart with its RBAC applied to a control plane, and a kubeconfig holding its token."""

    def __init__(
        self,
        plane: ControlPlane,
        helm: Helm,
        folder: Path,
        values: dict[str, str] | None = None,
        templates: tuple[str, ...] = OPERATOR_RBAC,
    ) -> None:
        self.plane, self.namespace = plane, f"tj-system-{uuid.uuid4().hex[:6]}"
        self.release = f"rbac-{uuid.uuid4().hex[:6]}"
        rendered = helm.template(self.release, self.namespace, values, show_only=templates)
        self.objects = [m for m in rendered if m["kind"] in IDENTITY_KINDS]
        with plane.api_client() as api:
            core = client.CoreV1Api(api)
            core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=self.namespace)))
            dynamic = DynamicClient(api)
            for manifest in self.objects:
                resource = dynamic.resources.get(api_version=manifest["apiVersion"], kind=manifest["kind"])
                dynamic.create(resource, body=manifest, namespace=manifest["metadata"].get("namespace"))
            (account,) = [m["metadata"]["name"] for m in self.objects if m["kind"] == "ServiceAccount"]
            request = client.AuthenticationV1TokenRequest(
                spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)
            )
            token = core.create_namespaced_service_account_token(account, self.namespace, request).status.token
        self.account = account
        self.kubeconfig = _bearer_kubeconfig(folder / f"{self.release}.kubeconfig", plane, token)

    def remove(self) -> None:
        with self.plane.api_client() as api:
            dynamic = DynamicClient(api)
            for manifest in self.objects:
                if manifest["metadata"].get("namespace") is None:
                    resource = dynamic.resources.get(api_version=manifest["apiVersion"], kind=manifest["kind"])
                    dynamic.delete(resource, name=manifest["metadata"]["name"])
            client.CoreV1Api(api).delete_namespace(self.namespace)


def refusals(process: OperatorProcess) -> list[str]:
    """The lines of the operator's log (its own and kopf's) that tell of a request RBAC refused."""
    assert process.server is not None
    process.server.check_alive()
    text = process.server.log_path.read_text(errors="replace")
    return [line for line in text.splitlines() if "Forbidden" in line or " 403" in line or "permission" in line]


@pytest.fixture(scope="module")
def chart_identity(cluster: ControlPlane, helm: Helm) -> Iterator[ChartIdentity]:
    with cluster.api_client() as api:
        for resource in crd.RESOURCES:
            install_crd(api, resource)
    with tempfile.TemporaryDirectory(prefix="tj-chart-rbac-") as folder:
        identity = ChartIdentity(cluster, helm, Path(folder))
        try:
            yield identity
        finally:
            identity.remove()


@pytest.fixture(scope="module")
def chart_operator(chart_identity: ChartIdentity, helm: Helm) -> Iterator[OperatorProcess]:
    """The operator as the chart's ServiceAccount, with the default trainer image the chart passes it."""
    image = operator_env(helm, {"operator.settings.defaultTrainerImage": TRAINER_IMAGE})
    settings = {"TJ_OPERATOR_DEFAULT_TRAINER_IMAGE": image["TJ_OPERATOR_DEFAULT_TRAINER_IMAGE"]}
    with operator_running(
        chart_identity.kubeconfig, TJ_OPERATOR_LEASE_NAMESPACE=chart_identity.namespace, **settings
    ) as process:
        yield process


@pytest.fixture
def h(cluster: ControlPlane, cluster_ns: str, chart_operator: OperatorProcess) -> Iterator[Harness]:
    with cluster.api_client() as api:
        yield Harness(api, cluster_ns, chart_operator)


@pytest.mark.cluster
def test_the_identity_is_the_chart_service_account(chart_identity: ChartIdentity) -> None:
    with chart_identity.plane.api_client(chart_identity.kubeconfig) as api:
        review = client.AuthenticationV1Api(api).create_self_subject_review(client.V1SelfSubjectReview())
    expected = f"system:serviceaccount:{chart_identity.namespace}:{chart_identity.account}"
    assert review.status.user_info.username == expected


@pytest.mark.cluster
def test_chart_rbac_runs_a_job_to_success(h: Harness) -> None:
    h.create(job_manifest("ok"))
    h.wait_phase("ok", "Running")
    for pod in h.wait_running_pods("ok", 2, attempt=1):
        h.finish(pod.metadata.name, 0)
    done = h.wait_phase("ok", "Succeeded")
    assert condition(done, "Succeeded")["status"] == "True"
    assert "JobCreated" in h.wait_event("ok", "JobSucceeded")  # events: create
    assert h.core.read_namespaced_service("ok", h.ns)  # services: create


@pytest.mark.cluster
def test_chart_rbac_runs_a_sweep_and_suspends_its_pruned_trial(h: Harness) -> None:
    """trainingsweeps: list, watch; their status: patch; trainingjobs: create, patch (a pruned trial suspended)."""
    stopping = {"algorithm": "Median", "startupTrials": 1}
    manifest = sweep_manifest(
        "sw", parameters=[SWEEP_PARAMETERS[1]], parallelism=2, maxTrials=2, earlyStopping=stopping
    )
    manifest["spec"]["template"]["spec"]["workers"] = {"replicas": 1}
    h.custom.create_namespaced_custom_object(GROUP, VERSION, h.ns, SWEEP_PLURAL, manifest)
    for number, accuracy in ((0, 0.9), (1, 0.1)):
        (rank0,) = h.wait_running_pods(f"sw-{number}", 1, attempt=1)
        report = {"step": 10, "heartbeat": time.time(), "metrics": {"accuracy": accuracy}, "metricsStep": 10}
        if number == 0:
            final = {**report, "step": 100, "finished": True}
            h.finish(rank0.metadata.name, 0, message=json.dumps(final))
            h.wait_phase("sw-0", "Succeeded")
        else:
            with progress_endpoint(rank0.status.pod_ip, report):
                h.wait("sw-1", lambda job: job["spec"]["runPolicy"].get("suspend"), "the pruned trial suspended")
    sweep = h.custom.get_namespaced_custom_object(GROUP, VERSION, h.ns, SWEEP_PLURAL, "sw")
    assert [t["phase"] for t in sweep["status"]["trials"]] == ["Succeeded", "Pruned"]


@pytest.mark.cluster
def test_a_job_without_an_image_runs_the_charts_default_trainer_image(h: Harness) -> None:
    h.create(
        job_manifest(
            "defaulted", workers={"replicas": 1, "image": "example.com/own:1"}, servers=1, mode="ParameterServer"
        )
    )
    (server, worker) = sorted(h.wait_running_pods("defaulted", 2, attempt=1), key=lambda p: p.metadata.name)
    assert (server.spec.containers[0].image, worker.spec.containers[0].image) == (TRAINER_IMAGE, "example.com/own:1")
    assert h.job("defaulted")["status"]["defaultImage"] == TRAINER_IMAGE


@pytest.mark.cluster
def test_chart_rbac_restarts_the_gang_after_a_failed_rank(h: Harness) -> None:
    h.create(job_manifest("gang", workers=3))
    first = h.wait_running_pods("gang", 3, attempt=1)
    h.finish(first[1].metadata.name, 75)
    restarted = h.wait_phase("gang", "Running", attempt=2)
    h.wait_running_pods("gang", 3, attempt=2)  # pods: delete + create
    assert restarted["status"]["restarts"]["retryable"] == 1
    assert restarted["status"]["lastFailure"]["pod"] == first[1].metadata.name


@pytest.mark.cluster
def test_chart_rbac_suspends_and_resumes(h: Harness) -> None:
    h.create(job_manifest("pausable"))
    h.wait_running_pods("pausable", 2, attempt=1)
    h.patch_spec("pausable", {"runPolicy": {"suspend": True}})
    h.wait_phase("pausable", "Suspended")
    poll_until(lambda: not h.pods("pausable"), timeout=30, what="pods of a suspended job to go")
    h.patch_spec("pausable", {"runPolicy": {"suspend": False}})
    h.wait_running_pods("pausable", 2, attempt=2)
    h.wait_phase("pausable", "Running", attempt=2)


@pytest.mark.cluster
def test_chart_rbac_deletes_a_finished_job_after_its_ttl(h: Harness) -> None:
    h.create(job_manifest("shortlived", runPolicy={"ttlSecondsAfterFinished": 1}))
    h.finish(h.wait_running_pods("shortlived", 2, attempt=1)[0].metadata.name, 78)
    h.wait_phase("shortlived", "Failed")
    h.wait_gone("shortlived", "the job deleted after its TTL (trainingjobs: delete)")


@pytest.mark.cluster
def test_the_operator_was_never_forbidden(chart_operator: OperatorProcess, h: Harness) -> None:
    """Runs after the lifecycles above: nothing the operator (or kopf) did was refused by RBAC."""
    refused = refusals(chart_operator)
    assert not refused, "\n".join(refused[:20])


@pytest.mark.cluster
@pytest.mark.parametrize(
    "attempt",
    [
        pytest.param(lambda core, ns: core.list_namespaced_secret(ns), id="read-secrets-in-a-job-namespace"),
        pytest.param(lambda core, ns: core.list_secret_for_all_namespaces(), id="list-secrets-cluster-wide"),
        pytest.param(lambda core, ns: core.read_namespaced_secret("any", ns), id="get-a-secret"),
        pytest.param(lambda core, ns: core.delete_node("gpu-node-0", dry_run="All"), id="delete-a-node"),
        pytest.param(lambda core, ns: core.list_namespaced_config_map(ns), id="read-configmaps"),
        pytest.param(lambda core, ns: core.patch_namespaced_pod_status("x", ns, {}), id="write-pod-status"),
    ],
)
def test_the_chart_identity_is_refused_what_it_does_not_need(
    chart_identity: ChartIdentity, cluster_ns: str, attempt: Any
) -> None:
    with (
        chart_identity.plane.api_client(chart_identity.kubeconfig) as api,
        pytest.raises(client.ApiException) as refused,
    ):
        attempt(client.CoreV1Api(api), cluster_ns)
    assert refused.value.status == 403


@pytest.mark.envtest
def test_the_api_identity_can_authenticate_and_authorize_callers_but_not_read_secrets(
    envtest: ControlPlane, apiserver: client.ApiClient, helm: Helm, tmp_path: Path, envtest_ns: str
) -> None:
    identity = ChartIdentity(envtest, helm, tmp_path, templates=("templates/api.yaml",))
    try:
        with envtest.api_client(identity.kubeconfig) as api:
            review = client.V1TokenReview(spec=client.V1TokenReviewSpec(token="not-a-token"))
            assert client.AuthenticationV1Api(api).create_token_review(review).status.authenticated is not True
            access = client.V1SubjectAccessReview(
                spec=client.V1SubjectAccessReviewSpec(
                    user="alice",
                    resource_attributes=client.V1ResourceAttributes(
                        group="trainingjob.io", resource="trainingjobs", verb="create", namespace=envtest_ns
                    ),
                )
            )
            assert client.AuthorizationV1Api(api).create_subject_access_review(access).status.allowed is False
            custom = client.CustomObjectsApi(api)
            assert custom.list_namespaced_custom_object("trainingjob.io", "v1alpha1", envtest_ns, "trainingjobs")
            with pytest.raises(client.ApiException) as refused:
                client.CoreV1Api(api).list_namespaced_secret(envtest_ns)
            assert refused.value.status == 403
    finally:
        identity.remove()
