"""The REST API's health: /healthz, /readyz through an apiserver outage and a frozen apiserver, /metrics, /docs."""

import os
import re
import signal
import threading
import uuid

import httpx
import pytest
from testbed.controlplane import ControlPlane
from testbed.processes import poll_until
from tests.support.rest_api import (
    TIMEOUT,
    World,
    create,
    jobs_path,
    manifest,
)

pytestmark = pytest.mark.envtest

OUTAGE_SECONDS = 5.0


def test_health_metrics_and_docs(world: World) -> None:
    for path in ("/healthz", "/readyz", "/docs", "/openapi.json"):
        assert world.anonymous.get(path).status_code == 200, path
    assert world.anonymous.get("/readyz").json()["status"] == "ok"
    world.writer.get(jobs_path(world.home))
    metrics = world.anonymous.get("/metrics").text
    assert 'trainingjob_api_requests_total{method="GET",route="/api/v1/namespaces/{namespace}/trainingjobs"' in metrics
    assert "trainingjob_api_cache_synced 1.0" in metrics


def test_the_docs_load_nothing_from_outside(world: World) -> None:
    """An air-gapped cluster reaches no CDN: every script and style of /docs is served by the API."""
    page = world.anonymous.get("/docs").text
    loaded = re.findall(r"""(?:src|href)=["']([^"']+)""", page) + re.findall(r"url: ?'([^']+)'", page)
    assert loaded and all(url.startswith("/") for url in loaded), loaded
    for url in loaded:
        assert world.anonymous.get(url).status_code == 200, url
    assert "SwaggerUIBundle" in world.anonymous.get("/docs-assets/swagger-ui-bundle.js").text


def test_an_apiserver_outage_is_503_and_readyz_follows_it(world: World, trainingjob_crd: ControlPlane) -> None:
    outage = threading.Thread(target=trainingjob_crd.restart_apiserver, args=(OUTAGE_SECONDS,))
    outage.start()
    try:
        stale = poll_until(lambda: readyz(world, "stale"), timeout=TIMEOUT, what="/readyz to say the cache is stale")
        assert stale.status_code == 503
        assert stale.json()["message"] == (
            "the job cache lost its watch on Kubernetes; it relists once Kubernetes answers"
        )

        def refused() -> httpx.Response | None:
            response = world.writer.post(jobs_path(world.home), json=manifest(f"outage-{uuid.uuid4().hex[:6]}"))
            return response if response.status_code == 503 else None

        failed = poll_until(refused, timeout=TIMEOUT, what="a create to answer 503")
        assert failed.json()["message"].startswith("the Kubernetes API server is unreachable: "), failed.text
    finally:
        outage.join()
    poll_until(lambda: readyz(world, "ok"), timeout=TIMEOUT, what="/readyz 200 again")
    create(world, "after-the-outage")


def readyz(world: World, status: str) -> httpx.Response | None:
    response = world.anonymous.get("/readyz")
    return response if response.json()["status"] == status else None


def test_readyz_fails_while_the_apiserver_does_not_answer(world: World, trainingjob_crd: ControlPlane) -> None:
    (apiserver,) = [server for server in trainingjob_crd.servers if server.name == "kube-apiserver"]
    os.kill(apiserver.process.pid, signal.SIGSTOP)  # connections stay open, nothing answers: the watch looks fine
    try:
        hung = poll_until(lambda: readyz(world, "unreachable"), timeout=TIMEOUT, what="/readyz to fail")
        assert hung.status_code == 503
        assert hung.json()["message"] == "the Kubernetes API server is unreachable: it did not answer in time"
    finally:
        os.kill(apiserver.process.pid, signal.SIGCONT)
    poll_until(lambda: readyz(world, "ok"), timeout=TIMEOUT, what="/readyz 200 again")
