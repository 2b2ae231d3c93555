"""The REST API under uvicorn against the envtest apiserver, and a world of callers with chosen rights."""

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from kubernetes import client
from testbed.controlplane import ControlPlane
from testbed.processes import free_port, poll_until
from testbed.silent_kubelet import silent_node as start_silent_node
from tests.support.rest_api import (
    ALL_VERBS,
    MONITOR_RULES,
    READ_VERBS,
    SERVER_RULES,
    TIMEOUT,
    Api,
    Clients,
    World,
    grant,
    service_account,
    token_kubeconfig,
)

from trainingjob.model import GROUP, PLURAL
from trainingjob_api.app import create_app
from trainingjob_api.settings import ApiSettings
from trainingjob_sdk.rest import SAME_SITE

TRANSPORTS = ["kube", "rest"]


@pytest.fixture(scope="module")
def admin(trainingjob_crd: ControlPlane) -> Iterator[client.ApiClient]:
    with trainingjob_crd.api_client() as api:
        yield api


@pytest.fixture(scope="module")
def api_options() -> dict[str, Any]:
    """The ApiSettings of the module's API besides its kubeconfig; a test module may override this fixture."""
    return {}


@pytest.fixture(scope="module")
def api_server(
    trainingjob_crd: ControlPlane, admin: client.ApiClient, tmp_path_factory: Any, api_options: dict[str, Any]
) -> Iterator[Api]:
    """The app under uvicorn on a free loopback port, acting as its own ServiceAccount with least rights."""
    system = f"tj-api-system-{uuid.uuid4().hex[:6]}"
    client.CoreV1Api(admin).create_namespace(client.V1Namespace(metadata={"name": system}))
    token = service_account(admin, system, "trainingjob-api", audience=None)  # its own identity, for Kubernetes
    grant(admin, system, (system, "trainingjob-api"), SERVER_RULES)
    grant(admin, f"{system}-monitor", (system, "monitor"), MONITOR_RULES)
    monitor = service_account(admin, system, "monitor")
    kubeconfig = token_kubeconfig(tmp_path_factory.mktemp("api") / "kubeconfig", trainingjob_crd, token)
    # The tests of a module share one caller, far faster than a person: its rate limit is not what they test.
    options = {"sse_keepalive_seconds": 1.0, "rate_per_second": 1000.0, "rate_burst": 100_000} | api_options
    settings = ApiSettings(kubeconfig=kubeconfig, **options)
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), host="127.0.0.1", port=free_port(), log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.config.port}"
    poll_until(lambda: httpx.get(f"{url}/readyz").status_code == 200, timeout=TIMEOUT, what="the API ready")
    yield Api(url, token, monitor)
    server.should_exit = True
    thread.join(TIMEOUT)
    client.RbacAuthorizationV1Api(admin).delete_cluster_role_binding(f"{system}-monitor")
    client.RbacAuthorizationV1Api(admin).delete_cluster_role(f"{system}-monitor")
    client.CoreV1Api(admin).delete_namespace(system)


@pytest.fixture
def world(api_server: Api, admin: client.ApiClient, envtest_ns: str) -> Iterator[World]:
    other = f"{envtest_ns[:50]}-other"
    client.CoreV1Api(admin).create_namespace(client.V1Namespace(metadata={"name": other}))
    writer_rules = [
        client.V1PolicyRule(api_groups=[GROUP], resources=[PLURAL], verbs=ALL_VERBS),
        client.V1PolicyRule(api_groups=[""], resources=["events"], verbs=["list"]),
        client.V1PolicyRule(api_groups=[""], resources=["pods/log"], verbs=["get"]),
    ]
    grant(admin, "writer", (envtest_ns, "writer"), writer_rules, namespace=envtest_ns)
    grant(
        admin,
        f"{other}-reader",
        (other, "reader"),
        [client.V1PolicyRule(api_groups=[GROUP], resources=[PLURAL], verbs=READ_VERBS)],
    )
    clients = [
        httpx.Client(base_url=api_server.url, timeout=TIMEOUT, headers=headers)
        for headers in (
            {"Authorization": f"Bearer {service_account(admin, envtest_ns, 'writer')}", **SAME_SITE},
            {"Authorization": f"Bearer {service_account(admin, other, 'reader')}", **SAME_SITE},
            SAME_SITE,  # what the API's own clients send: these tests are about who may, not from where
            {"Authorization": f"Bearer {api_server.monitor_token}"},
        )
    ]
    yield World(envtest_ns, other, *clients)
    for each in clients:
        each.close()
    client.RbacAuthorizationV1Api(admin).delete_cluster_role_binding(f"{other}-reader")
    client.RbacAuthorizationV1Api(admin).delete_cluster_role(f"{other}-reader")
    client.CoreV1Api(admin).delete_namespace(other)


@pytest.fixture(params=TRANSPORTS)
def clients(  # noqa: PLR0917 (fixtures, by name)
    request: pytest.FixtureRequest, world: World, api_server: Api, admin: client.ApiClient,
    trainingjob_crd: ControlPlane, tmp_path: Path,
) -> Clients:  # fmt: skip
    """The SDK through each transport, for ServiceAccounts of the test's namespaces."""
    return Clients(request.param, trainingjob_crd, api_server, admin, world.home, tmp_path)


@pytest.fixture
def silent_node(trainingjob_crd: ControlPlane, admin: client.ApiClient, tmp_path: Path) -> Iterator[str]:
    """A Node whose kubelet serves every pod's log as one line, then nothing: follow streams stay open and idle."""
    with start_silent_node(trainingjob_crd, admin, tmp_path) as node:
        yield node
