"""The REST API process serves HTTPS with the certificate it is given: a client that trusts the CA gets answers,
a plain-HTTP client gets none, and a process told to serve clear text on a public address refuses to start."""

import ssl
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import pytest
from testbed.controlplane import ControlPlane
from testbed.processes import Server, free_port
from tests.support.cli import REPO, tjctl

pytestmark = pytest.mark.envtest


def api_env(plane: ControlPlane, port: int, **settings: str) -> dict[str, str]:
    paths = ":".join(str(REPO / p) for p in ("operator", "api", "trainer-image", "."))
    return {"PYTHONPATH": paths, "TJ_API_KUBECONFIG": str(plane.kubeconfig), "TJ_API_PORT": str(port), **settings}


def test_the_api_serves_https_only(trainingjob_crd: ControlPlane) -> None:
    pair, port = trainingjob_crd.pki.issue("api-serving", "trainingjob-api", server=True), free_port()
    env = api_env(trainingjob_crd, port, TJ_API_TLS_CERT_FILE=str(pair.cert), TJ_API_TLS_KEY_FILE=str(pair.key))
    with tempfile.TemporaryDirectory(prefix="tj-api-tls-") as logs:
        server = Server("api", [sys.executable, "-m", "trainingjob_api"], Path(logs), env)
        try:
            trusted = ssl.create_default_context(cafile=str(trainingjob_crd.pki.cert))
            url = f"https://127.0.0.1:{port}/healthz"
            server.wait_ready(lambda: _answers(url, trusted), timeout=30)
            with pytest.raises(httpx.HTTPError):
                httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
            with pytest.raises(httpx.ConnectError):  # a certificate from nobody it trusts
                httpx.get(url, timeout=5, verify=ssl.create_default_context())
            server_url, ca = f"https://127.0.0.1:{port}", str(trainingjob_crd.pki.cert)
            trusting = tjctl("--server", server_url, "--token", "not-a-token", "--cacert", ca, "list")
            assert trusting.returncode != 0 and "TokenReview" in trusting.stdout + trusting.stderr  # TLS passed
            doubting = tjctl("--server", server_url, "--token", "not-a-token", "list")
            said = doubting.stdout + doubting.stderr  # the certificate refused, and what to do; not "unreachable"
            assert doubting.returncode == 4 and "a CA this client does not trust" in said and "--cacert" in said
            assert "unreachable" not in said, said
        finally:
            server.stop()


def _answers(url: str, context: ssl.SSLContext) -> bool:
    try:
        return httpx.get(url, timeout=2, verify=context).status_code == 200
    except httpx.TransportError:
        return False


def test_clear_text_on_a_public_address_is_refused_at_start(trainingjob_crd: ControlPlane) -> None:
    env = api_env(trainingjob_crd, free_port(), TJ_API_HOST="0.0.0.0")
    result = subprocess.run(
        [sys.executable, "-m", "trainingjob_api"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode != 0 and "TJ_API_PLAIN_HTTP" in result.stderr
