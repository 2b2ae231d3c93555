"""The REST API's health against a real apiserver: what strangers learn (/healthz, whether /readyz is ok), what
needs RBAC's nonResourceURLs (/metrics, why /readyz fails: SubjectAccessReview), /docs with a token, and /readyz
through an apiserver outage and a frozen apiserver."""

import os
import re
import signal
import threading
import uuid
from typing import Any

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


@pytest.fixture(scope="module")
def api_options() -> dict[str, Any]:
    """The reviews of the monitor's token kept a minute: while the apiserver is down or frozen nobody's token can
    be reviewed, and the monitor reads why /readyz fails only with its reviews cached from before."""
    return {"auth_cache_seconds": 60.0}


def test_strangers_learn_liveness_and_readiness_only(world: World) -> None:
    assert world.anonymous.get("/healthz").json() == {"status": "ok"}
    assert world.anonymous.get("/readyz").json() == {"status": "ok"}  # not how many jobs there are
    for path in ("/metrics", "/docs", "/openapi.json", "/docs-assets/swagger-ui-bundle.js"):
        assert world.anonymous.get(path).status_code == 401, path
        assert world.anonymous.get(path, headers={"Authorization": "Bearer forged"}).status_code == 401, path


def test_metrics_and_readiness_details_need_their_nonresource_rights(world: World) -> None:
    """The writer may do anything to jobs, yet not `get /metrics`, nor read why /readyz fails or how many jobs of
    every tenant there are (Kubernetes lets everyone `get /readyz`: not the right asked); the monitor may `get
    /metrics` (nonResourceURLs) and nothing else, as the apiserver's SubjectAccessReview says."""
    world.writer.get(jobs_path(world.home))
    assert world.writer.get("/metrics").status_code == 403
    assert world.writer.get("/readyz").json() == {"status": "ok"}
    metrics = world.monitor.get("/metrics").text
    assert 'trainingjob_api_requests_total{method="GET",route="/api/v1/namespaces/{namespace}/trainingjobs"' in metrics
    assert "trainingjob_api_cache_synced 1.0" in metrics
    assert world.monitor.get("/readyz").json()["jobs"] >= 0
    assert world.monitor.get(jobs_path(world.home)).status_code == 403


def test_the_docs_load_nothing_from_outside(world: World) -> None:
    """An air-gapped cluster reaches no CDN: every script and style of /docs is served by the API (to a caller with
    a token: in a browser, the authenticating proxy's)."""
    page = world.reader.get("/docs").text
    loaded = re.findall(r"""(?:src|href)=["']([^"']+)""", page) + re.findall(r"url: ?'([^']+)'", page)
    assert loaded and all(url.startswith("/") for url in loaded), loaded
    for url in loaded:
        assert world.reader.get(url).status_code == 200, url
    assert "SwaggerUIBundle" in world.reader.get("/docs-assets/swagger-ui-bundle.js").text


def test_an_apiserver_outage_is_503_and_readyz_follows_it(world: World, trainingjob_crd: ControlPlane) -> None:
    readyz(world, "ok")  # the monitor's token and right reviewed now, kept (api_options)
    outage = threading.Thread(target=trainingjob_crd.restart_apiserver, args=(OUTAGE_SECONDS,))
    outage.start()
    try:
        stale = poll_until(lambda: readyz(world, "stale"), timeout=TIMEOUT, what="/readyz to say the cache is stale")
        assert stale.status_code == 503
        assert stale.json()["message"] == (
            "the job cache lost its watch on Kubernetes; it relists once Kubernetes answers"
        )
        assert world.anonymous.get("/readyz").json() == {"status": "unavailable"}

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
    """/readyz as the monitor reads it (why it fails), when it says `status`."""
    response = world.monitor.get("/readyz")
    return response if response.json()["status"] == status else None


def test_readyz_fails_while_the_apiserver_does_not_answer(world: World, trainingjob_crd: ControlPlane) -> None:
    (apiserver,) = [server for server in trainingjob_crd.servers if server.name == "kube-apiserver"]
    readyz(world, "ok")  # the monitor's reviews cached: a frozen apiserver cannot review a token
    os.kill(apiserver.process.pid, signal.SIGSTOP)  # connections stay open, nothing answers: the watch looks fine
    try:
        hung = poll_until(lambda: readyz(world, "unreachable"), timeout=TIMEOUT, what="/readyz to fail")
        assert hung.status_code == 503
        assert hung.json()["message"] == "the Kubernetes API server is unreachable: it did not answer in time"
    finally:
        os.kill(apiserver.process.pid, signal.SIGCONT)
    poll_until(lambda: readyz(world, "ok"), timeout=TIMEOUT, what="/readyz 200 again")
