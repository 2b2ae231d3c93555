"""Reading a job on the real cluster: `kubectl logs` of a rank, `tjctl logs`, and the REST API through its
Service (HTTPS with the chart's self-signed CA, a ServiceAccount token for the API's audience)."""

import base64
import os
import subprocess
import tempfile
from pathlib import Path

import httpx
import pytest
from kubernetes import client
from testbed.harness import Harness
from testbed.node import REPO, NodeTier
from testbed.node_cluster import SYSTEM_NAMESPACE, kubectl
from testbed.node_jobs import example, pod_of
from tests.support.rest_api import grant, service_account

from trainingjob.model import GROUP, PLURAL

pytestmark = pytest.mark.node


def _finished_job(nh: Harness) -> str:
    job = example("digits-ddp.yaml")[0]
    job["metadata"]["name"] = name = "readable"
    job["spec"]["trainer"]["steps"] = 100
    job["spec"]["checkpoint"]["volume"] = {"emptyDir": {}}
    nh.create(job)
    nh.wait_phase(name, "Succeeded", timeout=300)
    return name


def test_logs_and_the_rest_api_answer_from_the_real_cluster(node_tier: NodeTier, nh: Harness) -> None:
    name = _finished_job(nh)
    rank1 = pod_of(nh, name, "worker", 1, attempt=1).metadata.name
    assert "rank 1" in kubectl(node_tier, "logs", "-n", nh.ns, rank1)

    tjctl = subprocess.run(
        [str(REPO / "bin" / "tjctl"), "--kubeconfig", str(node_tier.plane.kubeconfig), "-n", nh.ns, "logs", name],
        capture_output=True, text=True, check=False, env={**os.environ},
    )  # fmt: skip
    assert tjctl.returncode == 0, tjctl.stderr
    assert "evaluation at step" in tjctl.stdout and "accuracy" in tjctl.stdout

    with node_tier.api_client() as api:
        core = client.CoreV1Api(api)
        service = next(
            s for s in core.list_namespaced_service(SYSTEM_NAMESPACE).items if s.metadata.name.endswith("-api")
        )
        tls = next(
            s for s in core.list_namespaced_secret(SYSTEM_NAMESPACE).items if s.metadata.name.endswith("-api-tls")
        )
        token = service_account(api, nh.ns, "reader")
        read = [client.V1PolicyRule(api_groups=[GROUP], resources=[PLURAL], verbs=["get", "list"])]
        grant(api, f"{nh.ns}-reader", (nh.ns, "reader"), read, namespace=nh.ns)
    port = service.spec.ports[0].port
    with tempfile.TemporaryDirectory() as folder:
        ca = Path(folder) / "ca.crt"
        ca.write_bytes(base64.b64decode(tls.data["ca.crt"]))
        host = f"{service.metadata.name}.{SYSTEM_NAMESPACE}.svc"
        transport = httpx.HTTPTransport(verify=str(ca))
        url = f"https://{service.spec.cluster_ip}:{port}/api/v1/namespaces/{nh.ns}/trainingjobs/{name}"
        with httpx.Client(transport=transport, headers={"Authorization": f"Bearer {token}"}) as rest:
            answer = rest.get(url, extensions={"sni_hostname": host})  # the certificate names the Service
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"]["phase"] == "Succeeded"
