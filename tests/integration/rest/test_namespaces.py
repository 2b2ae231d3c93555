"""An API that serves some namespaces only (TJ_API_NAMESPACES, chart api.namespaces) works with rights in those
namespaces alone: its cache watches each, it serves their jobs, and answers 404 for every other namespace."""

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from kubernetes import client
from testbed.controlplane import ControlPlane
from testbed.processes import free_port, poll_until
from tests.support.rest_api import (
    ALL_VERBS,
    SERVER_CLUSTER_RULES,
    SERVER_JOB_RULES,
    TIMEOUT,
    grant,
    jobs_path,
    manifest,
    service_account,
    token_kubeconfig,
)

from trainingjob.model import GROUP, PLURAL
from trainingjob_api.app import create_app
from trainingjob_api.settings import ApiSettings
from trainingjob_sdk.rest import SAME_SITE

pytestmark = pytest.mark.envtest


@pytest.fixture
def scoped_api(trainingjob_crd: ControlPlane, envtest_ns: str, tmp_path: Any) -> Iterator[httpx.Client]:
    """The API serving `envtest_ns` only, as an identity with Roles there and the review rights cluster-wide; a
    caller who may do anything anywhere."""
    with trainingjob_crd.api_client() as admin:
        system = f"tj-scoped-{uuid.uuid4().hex[:6]}"
        client.CoreV1Api(admin).create_namespace(client.V1Namespace(metadata={"name": system}))
        token = service_account(admin, system, "api", audience=None)
        grant(admin, f"{system}-reviews", (system, "api"), SERVER_CLUSTER_RULES)
        grant(admin, system, (system, "api"), SERVER_JOB_RULES, namespace=envtest_ns)
        grant(admin, f"{system}-caller", (envtest_ns, "caller"), [client.V1PolicyRule(
            api_groups=[GROUP], resources=[PLURAL], verbs=ALL_VERBS)])  # fmt: skip
        caller = service_account(admin, envtest_ns, "caller")
        settings = ApiSettings(kubeconfig=token_kubeconfig(tmp_path / "kubeconfig", trainingjob_crd, token),
                               namespaces=[envtest_ns])  # fmt: skip
        server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=free_port()))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        url = f"http://127.0.0.1:{server.config.port}"
        poll_until(lambda: httpx.get(f"{url}/readyz").status_code == 200, timeout=TIMEOUT, what="the API ready")
        with httpx.Client(
            base_url=url, timeout=TIMEOUT, headers={"Authorization": f"Bearer {caller}", **SAME_SITE}
        ) as http:
            yield http
        server.should_exit = True
        thread.join(TIMEOUT)
        rbac = client.RbacAuthorizationV1Api(admin)
        for name in (f"{system}-reviews", f"{system}-caller"):
            rbac.delete_cluster_role_binding(name)
            rbac.delete_cluster_role(name)
        client.CoreV1Api(admin).delete_namespace(system)


def test_an_api_with_rights_in_its_namespaces_only_serves_them(scoped_api: httpx.Client, envtest_ns: str) -> None:
    created = scoped_api.post(jobs_path(envtest_ns), json=manifest("served"))
    assert created.status_code == 201, created.text
    poll_until(lambda: scoped_api.get(jobs_path(envtest_ns, "served")).status_code == 200, timeout=TIMEOUT)
    listed = scoped_api.get("/api/v1/trainingjobs").json()["items"]
    assert [(j["metadata"]["namespace"], j["metadata"]["name"]) for j in listed] == [(envtest_ns, "served")]
    elsewhere = scoped_api.get(jobs_path("default"))
    assert elsewhere.status_code == 404 and "not served" in elsewhere.json()["message"]
