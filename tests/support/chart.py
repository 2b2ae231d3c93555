"""The Helm chart in tests: the value sets rendered everywhere, the operator's environment as the chart renders it,
and a ServiceAccount of the chart with its RBAC applied to a control plane (ChartIdentity)."""

import uuid
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.dynamic import DynamicClient
from testbed.controlplane import ControlPlane
from testbed.helm import Helm
from testbed.operator import OperatorProcess

Manifest = dict[str, Any]
OPERATOR_RBAC = ("templates/operator-serviceaccount.yaml", "templates/operator-rbac.yaml")
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
    "pinned-images": {
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


def in_namespace(namespace: str, values: dict[str, str]) -> dict[str, str]:
    """The values with the placeholder {ns} replaced by `namespace`."""
    return {key: value.replace("{ns}", namespace) for key, value in values.items()}


def operator_env(helm: Helm, values: dict[str, str]) -> dict[str, str]:
    """The operator container's environment as the chart renders it with these values."""
    (deployment,) = helm.template("rel", "ns", values, show_only=["templates/operator-deployment.yaml"])
    return {e["name"]: e["value"] for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}


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
