"""The agent's HTTP endpoint on loopback: signed orders and reports, 401 for anything unsigned, bounded bodies and
connections, garbage answered and survived, long polls, and a follower that serves only its own status."""

import contextlib
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from testbed.processes import poll_until

from trainer.agent_auth import SIGNATURE_HEADER, sign
from trainer.agent_http import AgentServer, Endpoints, request_json
from trainer.agent_state import FAILED, STARTING, GangState

pytestmark = pytest.mark.fast

KEY = b"k" * 32
Address = tuple[str, int]


@dataclass
class Served:
    """A running endpoint, its gang (None for a follower) and how often it woke the main loop."""

    address: Address
    gang: GangState | None
    wakes: list[int]


@contextlib.contextmanager
def serve(
    gang: GangState | None,
    *,
    connections: int = 8,
    long_poll: float = 5.0,
    ask: Callable[[int, int], bool] = lambda attempt, after_step: False,
) -> Iterator[Served]:
    """An AgentServer on a free loopback port; a wake begins what was ordered, as the agent's main loop would."""
    wakes: list[int] = []

    def wake() -> None:
        wakes.append(1)
        if gang is not None:
            gang.begin(gang.ordered)

    status = {"rank": 0 if gang is not None else 1, "attempt": 1, "child": 123, "spare": None, "waiting": False}
    endpoints = Endpoints(KEY, lambda: status, gang, wake, ask, long_poll_seconds=long_poll, order_wait_seconds=5.0)
    server = AgentServer(0, endpoints, connections).start()
    try:
        yield Served(("127.0.0.1", server.port), gang, wakes)
    finally:
        if gang is not None:
            gang.close()
        server.stop()


@pytest.fixture
def coordinator() -> Iterator[Served]:
    with serve(GangState(attempt=1, pods=2)) as served:
        yield served


@pytest.fixture
def follower() -> Iterator[Served]:
    with serve(None) as served:
        yield served


def raw(address: Address, data: bytes) -> bytes:
    """Send bytes as they are; what the server answers before it closes."""
    with socket.create_connection(address, timeout=15) as sock:
        sock.sendall(data)
        with contextlib.suppress(OSError):  # the server may have answered and closed already
            sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks)


def test_a_signed_order_starts_the_attempt_and_a_replay_changes_nothing(coordinator: Served) -> None:
    status, gang = request_json(coordinator.address, "POST", "/attempt", body={"attempt": 2}, key=KEY)
    assert status == 200 and gang is not None
    assert (gang["attempt"], gang["state"], gang["ordered"]) == (2, STARTING, 2)
    assert request_json(coordinator.address, "POST", "/attempt", body={"attempt": 2}, key=KEY) == (200, gang)
    assert request_json(coordinator.address, "POST", "/attempt", body={"attempt": 1}, key=KEY) == (200, gang)
    assert len(coordinator.wakes) == 1


def test_a_signed_checkpoint_ask_reaches_the_agent_and_orders_nothing() -> None:
    asks: list[tuple[int, int]] = []

    def ask(attempt: int, after_step: int) -> bool:
        asks.append((attempt, after_step))
        return attempt == 1

    with serve(GangState(attempt=1, pods=2), ask=ask) as served:
        address, gang = served.address, served.gang
        status, answer = request_json(address, "POST", "/attempt", body={"attempt": 1, "checkpointAfter": 300}, key=KEY)
        assert status == 200 and answer is not None and answer["checkpointAsked"] is True
        status, answer = request_json(address, "POST", "/attempt", body={"attempt": 2, "checkpointAfter": 0}, key=KEY)
        assert status == 200 and answer is not None and answer["checkpointAsked"] is False
        assert request_json(address, "POST", "/attempt", body={"attempt": 1, "checkpointAfter": 9}, key=None)[0] == 401
        assert asks == [(1, 300), (2, 0)] and gang is not None and gang.ordered == 1  # an ask orders no attempt 2


@pytest.mark.parametrize("key", [None, b"x" * 32], ids=["unsigned", "wrong-key"])
def test_unsigned_or_wrongly_signed_posts_are_refused_and_change_nothing(
    coordinator: Served, key: bytes | None
) -> None:
    assert coordinator.gang is not None
    before = coordinator.gang.snapshot()
    status, _ = request_json(coordinator.address, "POST", "/attempt", body={"attempt": 2}, key=key)
    assert status == 401
    report = {"rank": 1, "attempt": 1, "event": "failed", "exitCode": 137}
    assert request_json(coordinator.address, "POST", "/report", body=report, key=key)[0] == 401
    assert coordinator.gang.snapshot() == before and coordinator.wakes == []


def test_a_signature_for_another_body_or_path_is_refused(coordinator: Served) -> None:
    body = b'{"attempt": 5}'
    for signature in (sign(KEY, "POST", "/attempt", b'{"attempt": 2}'), sign(KEY, "POST", "/report", body)):
        head = f"POST /attempt HTTP/1.0\r\nContent-Length: {len(body)}\r\n{SIGNATURE_HEADER}: {signature}\r\n\r\n"
        assert raw(coordinator.address, head.encode() + body).startswith(b"HTTP/1.0 401")
    assert coordinator.gang is not None and coordinator.gang.ordered == 1


def test_reports_fail_the_gang_and_ready_says_so(coordinator: Served) -> None:
    report = {"rank": 1, "attempt": 1, "event": "failed", "exitCode": 137}
    assert request_json(coordinator.address, "POST", "/report", body=report, key=KEY) == (200, {"accepted": True})
    stale = {**report, "attempt": 7}
    assert request_json(coordinator.address, "POST", "/report", body=stale, key=KEY) == (200, {"accepted": False})
    status, gang = request_json(coordinator.address, "GET", "/gang")
    assert status == 200 and gang is not None and gang["state"] == FAILED
    assert [(f["rank"], f["exitCode"]) for f in gang["failures"]] == [(1, 137)]
    assert request_json(coordinator.address, "GET", "/ready") == (503, {"ready": False})
    assert request_json(coordinator.address, "GET", "/next?after=1") == (200, {"attempt": 1, "state": FAILED})


@pytest.mark.parametrize(
    ("target", "body"),
    [
        ("/attempt", {"attempt": "2"}),
        ("/attempt", {"attempt": True}),
        ("/attempt", {"attempt": 0}),
        ("/attempt", {}),
        ("/attempt", {"attempt": 1, "checkpointAfter": "100"}),
        ("/attempt", {"attempt": 1, "checkpointAfter": -1}),
        ("/attempt", {"attempt": 1, "checkpointAfter": None}),
        ("/report", {"rank": 1, "attempt": 1, "event": "exploded"}),
        ("/report", {"rank": -1, "attempt": 1, "event": "failed"}),
        ("/report", {"rank": 1, "attempt": 1, "event": "failed", "exitCode": 1.5}),
    ],
)
def test_signed_bodies_with_bad_fields_are_400(coordinator: Served, target: str, body: dict[str, object]) -> None:
    assert request_json(coordinator.address, "POST", target, body=body, key=KEY)[0] == 400
    assert coordinator.wakes == []


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"POST /attempt HTTP/1.0\r\n\r\n", b"411"),
        (b"POST /attempt HTTP/1.0\r\nContent-Length: 5000\r\n\r\n" + b"x" * 5000, b"413"),
        (b"POST /attempt HTTP/1.0\r\nContent-Length: -1\r\n\r\n", b"400"),
        (b"POST /attempt HTTP/1.0\r\nContent-Length: 10\r\n\r\nshort", b"400"),
        (b"GET /next?after=x HTTP/1.0\r\n\r\n", b"400"),
        (b"GET /nowhere HTTP/1.0\r\n\r\n", b"404"),
        (b"DELETE /gang HTTP/1.0\r\n\r\n", b"501"),
        (b"\x00\xff\xfe garbage\r\n\r\n", b"400"),
    ],
    ids=["no-length", "too-long", "negative-length", "short-body", "bad-after", "no-path", "method", "garbage"],
)
def test_malformed_requests_get_an_answer_and_the_server_goes_on(
    coordinator: Served, request_bytes: bytes, status: bytes
) -> None:
    answer = raw(coordinator.address, request_bytes)
    assert status in answer.splitlines()[0], answer  # garbage is answered as HTTP/0.9: the status in the body
    assert request_json(coordinator.address, "GET", "/ready") == (200, {"ready": True})


def test_requests_over_the_connection_bound_are_turned_away_at_once() -> None:
    with serve(GangState(attempt=1, pods=2), connections=1) as served:
        # A client that connects and says nothing holds the one slot (until the request timeout): connections are
        # accepted in order, so the next one is over the bound.
        with socket.create_connection(served.address, timeout=15):
            assert raw(served.address, b"GET /ready HTTP/1.0\r\n\r\n").startswith(b"HTTP/1.0 503")
        # The slot is free again once the silent client's handler has seen it go.
        ready = poll_until(
            lambda: request_json(served.address, "GET", "/ready")[0] == 200, timeout=15, interval=0.01, what="a slot"
        )
        assert ready


def test_a_follower_serves_its_status_and_nothing_of_the_gang(follower: Served) -> None:
    assert request_json(follower.address, "GET", "/ready") == (200, {"ready": True})
    status, body = request_json(follower.address, "GET", "/status")
    assert status == 200 and body is not None and (body["rank"], body["child"]) == (1, 123)
    assert request_json(follower.address, "GET", "/gang")[0] == 404
    assert request_json(follower.address, "POST", "/attempt", body={"attempt": 2}, key=KEY)[0] == 404
