"""One bounded HTTP exchange with a pod (kube/pod_http.py), against pods played by a socket on loopback: what an
honest one answers is read; one that drips its headers, sends without end, sends too much, never answers or does
not speak HTTP costs the caller its deadline at most and yields nothing. Also the two callers: the progress read and
the signed order."""

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from trainingjob.kube import agents
from trainingjob.kube.agents import send_order
from trainingjob.kube.pod_http import Answer, exchange
from trainingjob.kube.progress import read_bounded

pytestmark = pytest.mark.fast

SECONDS = 0.5  # the deadline hostile pods meet
HONEST_SECONDS = 30.0  # an honest pod's answer ends the exchange at once: its deadline only has to allow a slow machine
BOUND = 10.0  # far above SECONDS, far below how long the hostile pods below would hold an unbounded caller
HOSTILE_SECONDS = 30.0  # how long a hostile pod keeps at it (then it stops, so a failing test ends)


def honest(body: bytes, status: str = "200 OK", extra: bytes = b"") -> bytes:
    return f"HTTP/1.0 {status}\r\nContent-Length: {len(body)}\r\n".encode() + extra + b"\r\n" + body


@contextmanager
def pod(behave: Callable[[socket.socket], None]) -> Iterator[tuple[int, list[bytes]]]:
    """A pod on loopback that reads each request whole, then answers with `behave`; yields its port and the
    requests it read."""
    listener = socket.create_server(("127.0.0.1", 0))
    received: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection:
                connection.settimeout(HOSTILE_SECONDS)
                try:
                    received.append(read_request(connection))
                    behave(connection)
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1], received
    finally:
        listener.close()


def read_request(connection: socket.socket) -> bytes:
    """The request line, headers and the Content-Length's body."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += connection.recv(4096)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.startswith(b"Content-Length:"))
    while len(body) < length:
        body += connection.recv(4096)
    return data


def send(data: bytes) -> Callable[[socket.socket], None]:
    return lambda connection: connection.sendall(data)


def drip(data: bytes, after: bytes = b"") -> Callable[[socket.socket], None]:
    """`after` at once, then `data` one byte at a time, a little apart, for HOSTILE_SECONDS."""

    def behave(connection: socket.socket) -> None:
        connection.sendall(after)
        end = time.monotonic() + HOSTILE_SECONDS
        for byte in data:
            if time.monotonic() > end:
                return
            connection.sendall(bytes([byte]))
            time.sleep(0.05)  # the hostile pod's pace, not the test's synchronization

    return behave


def silent(connection: socket.socket) -> None:
    connection.recv(1)  # until the caller gives up and closes, or HOSTILE_SECONDS


ENDLESS_HEADERS = b"HTTP/1.0 200 OK\r\n" + b"X-Drip: y\r\n" * 100_000  # far past HEADER_BYTES
BODY_AFTER = b"HTTP/1.0 200 OK\r\nContent-Length: 1000\r\n\r\n"


@pytest.mark.parametrize(
    ("behave", "expected"),
    [
        pytest.param(send(honest(b'{"step": 3}')), Answer(200, b'{"step": 3}'), id="honest"),
        pytest.param(send(honest(b"no", "503 Service Unavailable")), Answer(503, b"no"), id="a-refusal"),
        pytest.param(send(b"HTTP/1.0 200 OK\r\n\r\nuntil closed"), Answer(200, b"until closed"), id="no-length"),
        pytest.param(send(honest(b"abc") + b"trailing"), Answer(200, b"abc"), id="more-than-its-length"),
        pytest.param(drip(ENDLESS_HEADERS), None, id="dripped-headers"),
        pytest.param(drip(b"x" * 1000, after=BODY_AFTER), None, id="dripped-body"),
        pytest.param(send(ENDLESS_HEADERS), None, id="headers-past-the-budget"),
        pytest.param(send(honest(b"x" * 2000)), None, id="body-past-the-limit"),
        pytest.param(send(b"HTTP/1.0 200 OK\r\nContent-Length: 9000\r\n\r\nx"), None, id="length-past-the-limit"),
        pytest.param(send(b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nab"), None, id="closed-short"),
        pytest.param(send(b"HTTP/1.0 200 OK\r\nContent-Length: -1\r\n\r\n"), None, id="negative-length"),
        pytest.param(send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc"), None, id="chunked"),
        pytest.param(send(b"SSH-2.0-OpenSSH\r\n\r\n"), None, id="not-http"),
        pytest.param(silent, None, id="never-answers"),
    ],
)
def test_an_exchange_is_bounded_in_time_and_bytes(behave: Callable[[socket.socket], None], expected: object) -> None:
    with pod(behave) as (port, _):
        began = time.monotonic()
        seconds = SECONDS if expected is None else HONEST_SECONDS
        answer = exchange("127.0.0.1", port, "GET", "/progress", limit=1024, seconds=seconds)
        took = time.monotonic() - began
    assert answer == expected
    assert expected is not None or took < BOUND, f"the exchange took {took:.1f} s"


def test_the_request_names_its_method_path_length_and_headers_and_asks_to_close() -> None:
    with pod(send(honest(b"ok"))) as (port, received):
        answer = exchange(
            "127.0.0.1", port, "POST", "/attempt", limit=64, seconds=HONEST_SECONDS, body=b"{}", headers={"X-A": "b"}
        )
    assert answer == Answer(200, b"ok")
    head, _, body = received[0].partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /attempt HTTP/1.1" and body == b"{}"
    assert {b"Host: 127.0.0.1", b"Connection: close", b"Content-Length: 2", b"X-A: b"} <= set(lines[1:])


def test_a_progress_read_and_an_order_get_nothing_from_a_dripping_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    with pod(drip(ENDLESS_HEADERS)) as (port, _):
        began = time.monotonic()
        assert read_bounded("127.0.0.1", port, "/progress", 1024, SECONDS) is None
        assert send_order("127.0.0.1", b"k" * 32, 2, port) is False
        assert time.monotonic() - began < 2 * BOUND
    monkeypatch.setattr(agents, "ORDER_SECONDS", HONEST_SECONDS)  # the honest pod may be slow to run here
    with pod(send(honest(b"{}"))) as (port, _):
        assert read_bounded("127.0.0.1", port, "/progress", 1024, HONEST_SECONDS) == b"{}"
        assert send_order("127.0.0.1", b"k" * 32, 2, port) is True
