"""What the REST API benchmarks share: a control plane with the CRD, bench namespaces and a caller who may read
jobs everywhere, and the API served on loopback once its cache holds every job."""

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import uvicorn
from fastapi.staticfiles import StaticFiles
from kubernetes import client
from testbed.controlplane import ControlPlane
from testbed.crds import install_crd
from testbed.processes import free_port, poll_until

from trainingjob.model import GROUP, PLURAL
from trainingjob_api.app import create_app
from trainingjob_api.settings import ApiSettings


def prepare(plane: ControlPlane, namespaces: int) -> str:
    """Install the CRD and the namespaces bench-0 ... bench-N-1; the token of a caller who may read every job."""
    with plane.api_client() as api:
        install_crd(api)
        core = client.CoreV1Api(api)
        for index in range(namespaces):
            core.create_namespace(client.V1Namespace(metadata={"name": f"bench-{index}"}))
        return caller_token(api)


def caller_token(api: client.ApiClient) -> str:
    """A ServiceAccount allowed to get, list and watch jobs everywhere, as a REST API caller would be, and to `get
    /metrics` (so the API's /readyz tells it how many jobs its cache holds)."""
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    core.create_namespaced_service_account("bench-0", client.V1ServiceAccount(metadata={"name": "bench"}))
    rules = [
        client.V1PolicyRule(api_groups=[GROUP], resources=[PLURAL], verbs=["get", "list", "watch"]),
        client.V1PolicyRule(non_resource_urls=["/metrics"], verbs=["get"]),
    ]
    rbac.create_cluster_role(client.V1ClusterRole(metadata={"name": "bench"}, rules=rules))
    ref = client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name="bench")
    subject = client.RbacV1Subject(kind="ServiceAccount", name="bench", namespace="bench-0")
    rbac.create_cluster_role_binding(
        client.V1ClusterRoleBinding(metadata={"name": "bench"}, role_ref=ref, subjects=[subject])
    )
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=["trainingjob-api"]))
    return str(core.create_namespaced_service_account_token("bench", "bench-0", request).status.token)


@contextmanager
def serve(plane: ControlPlane, jobs: int, token: str, static: dict[str, Path] | None = None) -> Iterator[str]:
    """The REST API on a loopback port once its cache holds `jobs` jobs (its /readyz tells `token`'s caller, see
    caller_token); `static` mounts folders beside it."""
    app = create_app(ApiSettings(kubeconfig=plane.kubeconfig))
    for path, folder in (static or {}).items():
        app.mount(path, StaticFiles(directory=folder, html=True), name=path.strip("/"))
    config = uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{config.port}"
    start = time.perf_counter()
    headers = {"Authorization": f"Bearer {token}"}

    def full() -> bool:
        return bool(httpx.get(f"{url}/readyz", headers=headers).json().get("jobs") == jobs)

    poll_until(full, timeout=300, what="the cache full")
    print(f"the API's cache listed {jobs} jobs in {time.perf_counter() - start:.1f} s")
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(30)
