"""The REST API's test world: its own least-privilege identity, callers with chosen rights, and request helpers.
The fixtures that start the API live in tests/integration/rest/conftest.py."""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml
from kubernetes import client
from testbed.controlplane import ControlPlane
from tests.support.builders import job_manifest

from trainingjob.kube.impersonation import SA_EXTRAS
from trainingjob.model import API_VERSION, GROUP, KIND, PLURAL
from trainingjob.model.sweep import SWEEP_PLURAL
from trainingjob_sdk import Client

ALL_VERBS = ["get", "list", "watch", "create", "update", "patch", "delete"]


READ_VERBS = ["get", "list", "watch"]


TIMEOUT = 30.0


AUDIENCE = "trainingjob-api"


# What a monitoring system's identity has: the API's metrics and why it is not ready, nothing about jobs.
MONITOR_RULES = [client.V1PolicyRule(non_resource_urls=["/metrics"], verbs=["get"])]
# What the API's own identity has, as the chart grants it: jobs, sweeps, pods and events to read, the two review
# APIs, and impersonation; it writes jobs and reads logs only as its caller (trainingjob.kube.impersonation).
# The first two are those a Role grants in each namespace the API serves (api.namespaces); the others are cluster-
# scoped in Kubernetes.
SERVER_JOB_RULES = [
    client.V1PolicyRule(api_groups=[GROUP], resources=[PLURAL, SWEEP_PLURAL], verbs=READ_VERBS),
    client.V1PolicyRule(api_groups=[""], resources=["pods", "events"], verbs=READ_VERBS),
]
SERVER_CLUSTER_RULES = [
    client.V1PolicyRule(api_groups=["authentication.k8s.io"], resources=["tokenreviews"], verbs=["create"]),
    client.V1PolicyRule(api_groups=["authorization.k8s.io"], resources=["subjectaccessreviews"], verbs=["create"]),
    client.V1PolicyRule(api_groups=[""], resources=["users", "groups", "serviceaccounts"], verbs=["impersonate"]),
    client.V1PolicyRule(
        api_groups=["authentication.k8s.io"],
        resources=["uids", *(f"userextras/{key}" for key in SA_EXTRAS)],
        verbs=["impersonate"],
    ),
]
SERVER_RULES = SERVER_JOB_RULES + SERVER_CLUSTER_RULES


@dataclass(frozen=True)
class Api:
    """The API served on loopback, and the token of its own ServiceAccount (which must never leak)."""

    url: str
    server_token: str
    monitor_token: str  # a caller allowed `get /metrics` (RBAC nonResourceURLs), nothing else


@dataclass(frozen=True)
class World:
    """Two namespaces and callers: `writer` may do anything in `home` only, `reader` may read everywhere,
    `anonymous` has no token, `monitor` may `get /metrics` only."""

    home: str
    other: str
    writer: httpx.Client
    reader: httpx.Client
    anonymous: httpx.Client
    monitor: httpx.Client  # may `get /metrics` (and so read why /readyz fails): Prometheus' rights, no job's


@dataclass(frozen=True)
class People:
    """Tokens of three people: `writer` may do everything to jobs in the namespace (and read its pods, logs and
    events), `reader` may only read jobs there, `outsider` may read jobs in `elsewhere` only."""

    writer: str
    reader: str
    outsider: str
    elsewhere: str


@dataclass(frozen=True)
class Clients:
    """Makes SDK clients for ServiceAccounts, through one transport, with the home namespace as default."""

    transport: str
    plane: ControlPlane
    api: Api
    admin: client.ApiClient
    home: str
    folder: Path

    def of(self, namespace: str, name: str) -> Client:
        if self.transport == "rest":
            return Client.rest(self.api.url, service_account(self.admin, namespace, name), namespace=self.home)
        token = service_account(self.admin, namespace, name, audience=None)  # for the Kubernetes API itself
        kubeconfig = token_kubeconfig(self.folder / f"{name}.kubeconfig", self.plane, token)
        return Client.kube(kubeconfig, namespace=self.home)


def manifest(name: str, labels: dict[str, str] | None = None, replicas: int = 2) -> dict[str, Any]:
    return job_manifest(name, labels=labels, workers=replicas, trainer={"steps": 10})


def service_account(api: client.ApiClient, namespace: str, name: str, audience: str | None = AUDIENCE) -> str:
    """Create a ServiceAccount and return a token for it from the TokenRequest API, minted for the REST API's
    audience (or, with audience None, for the Kubernetes API's own)."""
    core = client.CoreV1Api(api)
    try:
        core.create_namespaced_service_account(namespace, client.V1ServiceAccount(metadata={"name": name}))
    except client.ApiException as error:
        if error.status != 409:
            raise
    audiences = [audience] if audience else []
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=audiences, expiration_seconds=3600)
    )
    return str(core.create_namespaced_service_account_token(name, namespace, request).status.token)


def grant(api: client.ApiClient, name: str, sa: tuple[str, str], rules: list[Any], namespace: str = "") -> None:
    """Bind `rules` to the ServiceAccount `sa` (namespace, name): a Role in `namespace`, else a ClusterRole."""
    rbac = client.RbacAuthorizationV1Api(api)
    subject = client.RbacV1Subject(kind="ServiceAccount", name=sa[1], namespace=sa[0])
    kind = "Role" if namespace else "ClusterRole"
    role_ref = client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind=kind, name=name)
    if namespace:
        rbac.create_namespaced_role(namespace, client.V1Role(metadata={"name": name}, rules=rules))
        binding = client.V1RoleBinding(metadata={"name": name}, role_ref=role_ref, subjects=[subject])
        rbac.create_namespaced_role_binding(namespace, binding)
    else:
        rbac.create_cluster_role(client.V1ClusterRole(metadata={"name": name}, rules=rules))
        binding = client.V1ClusterRoleBinding(metadata={"name": name}, role_ref=role_ref, subjects=[subject])
        rbac.create_cluster_role_binding(binding)


def token_kubeconfig(path: Path, plane: ControlPlane, token: str) -> Path:
    cluster = {"server": plane.server_url, "certificate-authority": str(plane.pki.cert)}
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "envtest", "cluster": cluster}],
        "users": [{"name": "api", "user": {"token": token}}],
        "contexts": [{"name": "api", "context": {"cluster": "envtest", "user": "api"}}],
        "current-context": "api",
    }
    path.write_text(yaml.safe_dump(document))
    return path


def jobs_path(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/trainingjobs" + (f"/{name}" if name else "")


def create(world: World, name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    response = world.writer.post(jobs_path(world.home), json=manifest(name, labels))
    assert response.status_code == 201, response.text
    return dict(response.json())


def worker_failed(admin: client.ApiClient, namespace: str, job: str, uid: str | None) -> None:
    """A Warning event about `job`, as the operator posts one when a worker fails."""
    involved = client.V1ObjectReference(api_version=API_VERSION, kind=KIND, name=job, namespace=namespace, uid=uid)
    event = client.CoreV1Event(
        metadata={"name": f"{job}.1"}, involved_object=involved, reason="WorkerFailed", type="Warning",
        message="a worker exited with code 1.", source=client.V1EventSource(component="trainingjob-operator"),
    )  # fmt: skip
    client.CoreV1Api(admin).create_namespaced_event(namespace, event)


def names(response: httpx.Response) -> list[str]:
    assert response.status_code == 200, response.text
    return [item["metadata"]["name"] for item in response.json()["items"]]
