"""Following jobs through the REST API: events, pod logs (of the current attempt or an earlier one), and the bounds
on streams that hold no thread."""

import json
import time
from contextlib import ExitStack, closing

import httpx
import pytest
from kubernetes import client
from testbed.processes import poll_until
from testbed.silent_kubelet import pod_of
from tests.support.rest_api import (
    TIMEOUT,
    World,
    create,
    jobs_path,
    manifest,
    service_account,
    worker_failed,
)

pytestmark = pytest.mark.envtest

STREAMERS, STREAMS_EACH = 10, 20  # 200 idle follow streams; 20 is the default bound per caller


def test_events_of_a_job(world: World, admin: client.ApiClient) -> None:
    job = create(world, "eventful")
    worker_failed(admin, world.home, "eventful", job["metadata"]["uid"])
    response = world.writer.get(jobs_path(world.home, "eventful") + "/events")
    assert response.status_code == 200, response.text
    [found] = response.json()["items"]
    assert found["reason"] == "WorkerFailed"
    assert found["source"] == "trainingjob-operator"
    assert world.reader.get(jobs_path(world.home, "eventful") + "/events").status_code == 403


def test_logs_without_a_kubelet_fail_clearly(world: World, admin: client.ApiClient) -> None:
    create(world, "logged")
    logs = jobs_path(world.home, "logged") + "/logs"
    missing = world.writer.get(logs, params={"replica": "worker-0"})
    assert missing.status_code == 404, missing.text
    assert "replica worker-0" in missing.json()["message"]
    assert world.writer.get(logs, params={"replica": "worker-0", "tailLines": 0}).status_code == 404  # as kubectl
    assert world.writer.get(logs, params={"replica": "worker-0", "tailLines": -1}).status_code == 422
    core = client.CoreV1Api(admin)
    core.create_namespaced_pod(world.home, pod_of("logged", attempt=1))  # envtest has no scheduler
    pending = world.writer.get(logs, params={"replica": "worker-0"})
    assert pending.status_code == 404, pending.text
    assert 'pod "logged-worker-0-1" has no logs yet: it is not scheduled' in pending.json()["message"]
    core.create_namespaced_pod(world.home, pod_of("logged", attempt=2, node="gpu-node-0"))  # no kubelet there
    unreachable = world.writer.get(logs, params={"replica": "worker-0"})
    assert unreachable.status_code == 502, unreachable.text
    assert 'the logs of pod "logged-worker-0-2" are not available from Kubernetes' in unreachable.json()["message"]
    assert world.writer.get(logs, params={"replica": "chief-0"}).status_code == 422


def test_watch_streams_count_against_the_callers_bound(world: World) -> None:
    create(world, "watched")
    url = jobs_path(world.home, "watched") + "/watch"
    with ExitStack() as stack:
        for _ in range(20):  # ApiSettings.max_log_streams_per_caller
            opened = stack.enter_context(world.writer.stream("GET", url))
            assert opened.status_code == 200
        with world.writer.stream("GET", url) as refused:  # a stream: an unbounded watch would never end
            assert refused.status_code == 429
            assert "streams (followed logs, watches)" in json.loads(refused.read())["message"]


def test_logs_of_an_earlier_attempt_while_its_pod_is_there(
    world: World, admin: client.ApiClient, silent_node: str
) -> None:
    create(world, "retried")
    core = client.CoreV1Api(admin)
    core.create_namespaced_pod(world.home, pod_of("retried", attempt=1, node=silent_node))
    core.create_namespaced_pod(world.home, pod_of("retried", attempt=2))  # the current attempt: not scheduled yet
    logs = jobs_path(world.home, "retried") + "/logs"
    current = world.writer.get(logs)
    assert current.status_code == 404, current.text
    assert 'pod "retried-worker-0-2" has no logs yet' in current.json()["message"]
    request = world.writer.build_request("GET", logs, params={"attempt": 1, "follow": "true"})
    with closing(world.writer.send(request, stream=True)) as earlier:  # the silent kubelet: one line, then nothing
        assert earlier.status_code == 200
        assert next(earlier.iter_raw()) == b"started\n"
    gone = world.writer.get(logs, params={"attempt": 3})
    assert gone.status_code == 404, gone.text
    assert "a pod of replica worker-0 in attempt 3 of" in gone.json()["message"]
    assert world.writer.get(logs, params={"attempt": 0}).status_code == 422


def callers(world: World, admin: client.ApiClient, count: int) -> list[httpx.Client]:
    """`count` more ServiceAccounts with the writer's role in the home namespace, as API clients."""
    names = [f"caller-{index}" for index in range(count)]
    subjects = [client.RbacV1Subject(kind="ServiceAccount", name=name, namespace=world.home) for name in names]
    ref = client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name="writer")
    binding = client.V1RoleBinding(metadata={"name": "callers"}, role_ref=ref, subjects=subjects)
    client.RbacAuthorizationV1Api(admin).create_namespaced_role_binding(world.home, binding)
    return [
        httpx.Client(base_url=world.writer.base_url, timeout=TIMEOUT, headers={"Authorization": f"Bearer {token}"})
        for token in (service_account(admin, world.home, name) for name in names)
    ]


def follow(caller: httpx.Client, path: str) -> httpx.Response:
    """A log stream, open once its headers are in; the caller closes it."""
    return caller.send(caller.build_request("GET", path, params={"follow": "true"}), stream=True)


def log_streams(world: World) -> float:
    metrics = world.monitor.get("/metrics").text
    return float(
        next(line.split()[1] for line in metrics.splitlines() if line.startswith("trainingjob_api_log_streams"))
    )


def test_idle_follow_streams_hold_no_thread_and_are_bounded(
    world: World, admin: client.ApiClient, silent_node: str
) -> None:
    create(world, "streamed")
    client.CoreV1Api(admin).create_namespaced_pod(world.home, pod_of("streamed", attempt=1, node=silent_node))
    logs = jobs_path(world.home, "streamed") + "/logs"
    with ExitStack() as stack:
        streamers = [stack.enter_context(each) for each in callers(world, admin, STREAMERS)]
        streams = [stack.enter_context(closing(follow(each, logs))) for each in streamers for _ in range(STREAMS_EACH)]
        assert {stream.status_code for stream in streams} == {200}
        assert log_streams(world) == STREAMERS * STREAMS_EACH
        start = time.perf_counter()
        assert world.anonymous.get("/healthz").status_code == 200
        assert world.writer.post(jobs_path(world.home), json=manifest("while-200-streams")).status_code == 201
        assert time.perf_counter() - start < 2.0
        with closing(follow(streamers[0], logs)) as refused:
            refused.read()
            assert refused.status_code == 429, refused.text
            assert f"holds {STREAMS_EACH} streams (followed logs, watches) already" in refused.json()["message"]
        streams[0].close()  # the caller leaves: its slot is freed

        def reopened() -> bool:
            with closing(follow(streamers[0], logs)) as again:
                return again.status_code == 200 and next(again.iter_raw()) == b"started\n"  # relayed as it comes

        poll_until(reopened, timeout=TIMEOUT, what="a freed slot")
    poll_until(lambda: log_streams(world) == 0, timeout=TIMEOUT, what="every stream closed when its caller left")
