"""Browser-tier fixtures: the cluster tier with the real operator, the REST API (and so the dashboard) under
uvicorn acting as its own least-privilege ServiceAccount, headless Chromium from Debian's packages driven by
Selenium, and people with chosen rights. Every test file here is marked `browser`; a missing browser is a
failure."""

import re
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from kubernetes import client
from selenium import webdriver
from testbed.chromium import start_chromium
from testbed.controlplane import ControlPlane
from testbed.harness import Harness
from testbed.operator import OperatorProcess
from testbed.processes import free_port, poll_until
from tests.support.pages import Dashboard
from tests.support.rest_api import (
    ALL_VERBS,
    READ_VERBS,
    SERVER_RULES,
    People,
    grant,
    service_account,
    token_kubeconfig,
)

from trainingjob.model import GROUP, PLURAL
from trainingjob.model.sweep import SWEEP_PLURAL
from trainingjob_api.app import create_app
from trainingjob_api.settings import ApiSettings

HERE = Path(__file__).parent
REPO = HERE.parents[1]
SCREENSHOTS = REPO / ".artifacts" / "screenshots"
TIMEOUT = 30.0


@pytest.fixture(scope="module")
def admin(cluster: ControlPlane) -> Iterator[client.ApiClient]:
    with cluster.api_client() as api:
        yield api


@pytest.fixture(scope="module")
def api_url(
    cluster: ControlPlane, admin: client.ApiClient, operator: OperatorProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The REST API (dashboard included) on a free loopback port, as its own ServiceAccount with least rights."""
    system = f"tj-dashboard-{uuid.uuid4().hex[:6]}"
    client.CoreV1Api(admin).create_namespace(client.V1Namespace(metadata={"name": system}))
    token = service_account(admin, system, "trainingjob-api", audience=None)
    grant(admin, system, (system, "trainingjob-api"), SERVER_RULES)
    kubeconfig = token_kubeconfig(tmp_path_factory.mktemp("api") / "kubeconfig", cluster, token)
    settings = ApiSettings(kubeconfig=kubeconfig, sse_keepalive_seconds=2.0, auth_cache_seconds=1.0)
    config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=free_port(), log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{config.port}"
    poll_until(lambda: httpx.get(f"{url}/readyz").status_code == 200, timeout=TIMEOUT, what="the API ready")
    yield url
    server.should_exit = True
    thread.join(TIMEOUT)
    rbac = client.RbacAuthorizationV1Api(admin)
    rbac.delete_cluster_role_binding(system)
    rbac.delete_cluster_role(system)
    client.CoreV1Api(admin).delete_namespace(system)


@pytest.fixture(scope="module")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[webdriver.Chrome, Path]]:
    downloads = tmp_path_factory.mktemp("downloads")
    chrome = start_chromium(downloads)
    yield chrome, downloads
    chrome.quit()


@pytest.fixture
def ui(chromium: tuple[webdriver.Chrome, Path], api_url: str, request: pytest.FixtureRequest) -> Iterator[Dashboard]:
    """The dashboard in a fresh tab state; a screenshot of where the test ended is saved either way."""
    chrome, downloads = chromium
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    dashboard = Dashboard(chrome, api_url, SCREENSHOTS, stem, downloads)
    dashboard.reset()
    yield dashboard
    dashboard.screenshot("end")
    dashboard.reset()


@pytest.fixture
def h(admin: client.ApiClient, cluster_ns: str, operator: OperatorProcess) -> Harness:
    return Harness(admin, cluster_ns, operator)


@pytest.fixture
def people(admin: client.ApiClient, cluster: ControlPlane, cluster_ns: str) -> Iterator[People]:
    elsewhere = f"{cluster_ns[:50]}-else"
    client.CoreV1Api(admin).create_namespace(client.V1Namespace(metadata={"name": elsewhere}))
    pod_rules = [
        client.V1PolicyRule(api_groups=[""], resources=["pods", "events"], verbs=["get", "list"]),
        client.V1PolicyRule(api_groups=[""], resources=["pods/log"], verbs=["get"]),
    ]
    read = [client.V1PolicyRule(api_groups=[GROUP], resources=[PLURAL], verbs=READ_VERBS)]
    write = [client.V1PolicyRule(api_groups=[GROUP], resources=[PLURAL, SWEEP_PLURAL], verbs=ALL_VERBS)]
    grant(admin, "writer", (cluster_ns, "writer"), [*write, *pod_rules], namespace=cluster_ns)
    grant(admin, "reader", (cluster_ns, "reader"), read, namespace=cluster_ns)
    grant(admin, "outsider", (elsewhere, "outsider"), read, namespace=elsewhere)
    yield People(
        writer=service_account(admin, cluster_ns, "writer"),
        reader=service_account(admin, cluster_ns, "reader"),
        outsider=service_account(admin, elsewhere, "outsider"),
        elsewhere=elsewhere,
    )
    client.CoreV1Api(admin).delete_namespace(elsewhere)
