"""The metrics port, served for real on a loopback port by an event loop of its own (as the operator's loop serves
it): /metrics to callers its gate lets through only, /healthz (open) that fails while the operator is unhealthy or
its loop is wedged, and 404 for the rest. The gate here is a table of tokens; the real one (TokenReview and
SubjectAccessReview against an apiserver) is tested in tests/integration/test_metrics_access.py."""

import asyncio
import contextlib
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, cast

import kopf
import pytest
from kubernetes import client

from trainingjob.kube.client import Connection
from trainingjob.kube.reviews import Refusal, bearer_token
from trainingjob.model import Phase, TrainingJobStatus
from trainingjob.runtime.controller import Controller
from trainingjob.runtime.leader import LeaderElector, lead
from trainingjob.runtime.metrics import Metrics
from trainingjob.runtime.metrics_server import MetricsServer
from trainingjob.runtime.operator import health_problem
from trainingjob.settings import OperatorSettings

pytestmark = pytest.mark.fast

TIMEOUT = 10.0
SCRAPER = {"Authorization": "Bearer scraper-token"}
GATE = {"scraper-token": None, "tenant-token": Refusal(403, 'user "tenant" cannot get path "/metrics"')}


def gate(authorization: str | None) -> Refusal | None:
    """The scraper may read /metrics, a tenant may not; any other token or none is not accepted."""
    return GATE.get(bearer_token(authorization), Refusal(401, "no token Kubernetes accepts"))


@dataclass
class Served:
    url: str
    loop: asyncio.AbstractEventLoop
    problem: list[str]  # what the health check reports: [""] while healthy


@pytest.fixture
def served() -> Iterator[Served]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="metrics loop", daemon=True)
    thread.start()
    metrics, problem = Metrics(), [""]
    metrics.queue_depth.set(3)
    server = MetricsServer(metrics.registry, lambda: problem[0], gate)
    port = asyncio.run_coroutine_threadsafe(server.start(0, "127.0.0.1"), loop).result(TIMEOUT)
    try:
        yield Served(f"http://127.0.0.1:{port}", loop, problem)
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(TIMEOUT)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(TIMEOUT)
        loop.close()


def get(
    url: str, method: str = "GET", timeout: float = TIMEOUT, headers: dict[str, str] | None = None
) -> tuple[int, str, str]:
    """(status, content type, body), for error statuses too; as the scraper unless other headers are given."""
    request = urllib.request.Request(url, method=method, headers=SCRAPER if headers is None else headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read().decode()


def test_metrics_are_served_in_the_prometheus_text_format(served: Served) -> None:
    status, content_type, body = get(served.url + "/metrics")
    assert status == 200 and content_type.startswith("text/plain")
    assert "trainingjob_queue_depth 3.0" in body.splitlines()
    assert "# TYPE trainingjob_job_phase gauge" in body


@pytest.mark.parametrize(
    ("headers", "status", "says"),
    [
        pytest.param({}, 401, "no token Kubernetes accepts", id="no token"),
        pytest.param({"Authorization": "Bearer forged"}, 401, "no token Kubernetes accepts", id="unknown token"),
        pytest.param({"Authorization": "Basic c2NyYXBlcg=="}, 401, "no token Kubernetes accepts", id="not bearer"),
        pytest.param({"Authorization": "Bearer tenant-token"}, 403, 'cannot get path "/metrics"', id="a tenant"),
    ],
)
def test_metrics_answer_only_callers_the_gate_lets_through(
    served: Served, headers: dict[str, str], status: int, says: str
) -> None:
    """Every tenant's job names, phases and losses are on /metrics: no series reaches a caller without the right."""
    answer, _, body = get(served.url + "/metrics", headers=headers)
    assert answer == status and says in body
    assert "trainingjob_" not in body


def test_a_refused_scrape_is_told_to_bring_a_bearer_token(served: Served) -> None:
    request = urllib.request.Request(served.url + "/metrics")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=TIMEOUT)
    assert refused.value.headers["WWW-Authenticate"].startswith("Bearer")


def test_healthz_says_what_is_wrong(served: Served) -> None:
    assert get(served.url + "/healthz", headers={})[::2] == (200, "ok\n")  # the kubelet's probe sends no token
    served.problem[0] = "the reconcile queue has not started"
    assert get(served.url + "/healthz")[::2] == (503, "the reconcile queue has not started\n")


@pytest.mark.parametrize("path", ["/", "/metrics/", "/metricsz", "/healthz/x", "/favicon.ico", "/debug/pprof"])
def test_every_other_path_is_not_found(served: Served, path: str) -> None:
    assert get(served.url + path)[0] == 404


def test_only_get_and_head(served: Served) -> None:
    assert get(served.url + "/metrics", method="HEAD")[0] == 200
    assert get(served.url + "/metrics", method="POST")[0] == 405


def test_a_wedged_event_loop_fails_healthz(served: Served) -> None:
    """A blocking call on the operator's loop stops every handler, /healthz included: the probe times out."""
    wedged, unwedge = threading.Event(), threading.Event()

    def block() -> None:
        wedged.set()
        unwedge.wait(TIMEOUT)

    served.loop.call_soon_threadsafe(block)
    assert wedged.wait(TIMEOUT)
    try:
        with pytest.raises(TimeoutError):
            get(served.url + "/healthz", timeout=1.0)
    finally:
        unwedge.set()
    assert get(served.url + "/healthz")[0] == 200


def controller() -> Controller:
    """A controller that has not started (building one sends no request: no leader election here)."""
    return Controller(OperatorSettings(leader_election=False), Connection(client.ApiClient(), "ns"), Metrics())


def test_the_operators_health_needs_a_started_controller_a_live_leader_election_and_live_watches() -> None:
    async def scenario() -> list[str]:
        memo = kopf.Memo()
        found = [health_problem(memo)]
        memo.controller = built = controller()
        informers = [SimpleNamespace(source=SimpleNamespace(resource=r), alive=True) for r in ("jobs", "pods")]
        leading = asyncio.get_running_loop().create_future()
        built.informers, built.leading = cast(Any, informers), cast(Any, leading)
        found.append(health_problem(memo))
        informers[1].alive = False
        found.append(health_problem(memo))
        leading.set_result(None)
        found.append(health_problem(memo))
        return found

    assert asyncio.run(scenario()) == [
        "the controller has not started",
        "",
        "watching pods stopped",
        "leader election stopped",
    ]


def test_no_reconcile_starts_before_every_store_holds_a_whole_list() -> None:
    """Before the pod store is filled every tracked pod would look vanished: the gate stays shut until then."""

    async def scenario() -> tuple[bool, bool]:
        built = controller()
        built.stores.jobs.replace([], "1")
        built.stores.services.replace([], "1")
        opening = asyncio.create_task(built._open_gate())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(opening), 1.0)
        shut = not built.gate.is_set()
        built.stores.pods.replace([], "1")
        await asyncio.wait_for(built.gate.wait(), TIMEOUT)
        opening.cancel()
        return shut, built.gate.is_set()

    assert asyncio.run(scenario()) == (True, True)


class Elector:
    """Leads at the first try, loses the Lease at the second."""

    def __init__(self) -> None:
        self.answers = [True, False]

    def try_once(self) -> bool:
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

    def is_leader(self) -> bool:  # asked only when try_once raises
        return False


def test_an_operator_that_loses_the_lease_drops_every_jobs_series() -> None:
    """The new leader reports the jobs now: the old one's gauges must not linger (and alert twice)."""

    async def scenario() -> tuple[float | None, float | None]:
        metrics, gate = Metrics(), asyncio.Event()
        metrics.record(("ns", "a"), None, TrainingJobStatus(phase=Phase.RUNNING))
        leading = asyncio.create_task(
            lead(cast(LeaderElector, Elector()), gate, 0.01, on_won=metrics.report_again, on_lost=metrics.forget_all)
        )
        await asyncio.wait_for(gate.wait(), TIMEOUT)
        before = value(metrics)
        deadline = asyncio.get_running_loop().time() + TIMEOUT
        while gate.is_set():
            assert asyncio.get_running_loop().time() < deadline, "the gate never closed"
            await asyncio.sleep(0.01)
        leading.cancel()
        return before, value(metrics)

    def value(metrics: Metrics) -> float | None:
        labels = {"namespace": "ns", "trainingjob": "a", "phase": "Running"}
        return metrics.registry.get_sample_value("trainingjob_job_phase", labels)

    assert asyncio.run(scenario()) == (1, None)
