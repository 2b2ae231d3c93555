"""The SDK's REST transport against fake APIs (httpx's MockTransport, or a small local server where a real socket
matters): the job read first, the watch reopened past its ends and read timeouts until its deadline (after pauses
when streams end at once, an outage when they never send the job), server-sent events read as the spec says.
Answers it cannot use: test_sdk_rest_answers."""

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from tests.support.builders import job_manifest
from tests.support.fake_rest import Chunks, Handler, rest

from trainingjob_sdk import Client, NotFound, TrainingJobError, Unavailable, WaitTimeout, deadline
from trainingjob_sdk.rest import RestJobs, sse_events

pytestmark = pytest.mark.fast


def event(phase: str, name: str = "status") -> bytes:
    job = job_manifest("a") | {"status": {"phase": phase, "attempt": 1}}
    return f"event: {name}\ndata: {json.dumps(job)}\n\n".encode()


SSE = {"Content-Type": "text/event-stream"}


def streams(*bodies: Chunks | Exception, headers: dict[str, str] = SSE) -> tuple[Handler, list[httpx.Request]]:
    """A handler answering a GET of the job with it, and each watch request with the next of `bodies` (the last
    again once they run out; an exception is raised instead of answering)."""
    asked: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        if not request.url.path.endswith("/watch"):
            return httpx.Response(200, json=job_manifest("a") | {"status": {"phase": "Pending", "attempt": 1}})
        asked.append(request)
        body = bodies[min(len(asked), len(bodies)) - 1]
        if isinstance(body, Exception):
            raise body
        return httpx.Response(200, headers=headers, stream=body)

    return answer, asked


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pauses between watch requests of 10 ms, and an outage raised after 0.3 s."""
    monkeypatch.setattr(deadline, "FIRST_PAUSE", 0.01)
    monkeypatch.setattr(deadline, "LONGEST_OUTAGE", 0.3)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("event: status\ndata: {}\n\n", [("status", "{}")], id="named"),
        pytest.param("data: a\ndata: b\n\n", [("message", "a\nb")], id="data lines joined, unnamed"),
        pytest.param("event:status\ndata:x\n\n", [("status", "x")], id="no space after the colon"),
        pytest.param("data:  x\n\n", [("message", " x")], id="one space taken"),
        pytest.param(": keepalive\n\ndata: x\n\n", [("message", "x")], id="comments"),
        pytest.param("event: deleted\ndata: a\n\ndata: b\n\n", [("deleted", "a"), ("message", "b")], id="name reset"),
        pytest.param("event: deleted\n\ndata: b\n\n", [("message", "b")], id="no data, no event, name reset"),
        pytest.param("id: 7\nretry: 5\ndata: x\n\n", [("message", "x")], id="other fields"),
        pytest.param("data: unfinished\n", [], id="an event the stream cut off"),
    ],
)
def test_server_sent_events_as_the_spec_reads_them(text: str, expected: list[tuple[str, str]]) -> None:
    assert list(sse_events(text.splitlines())) == expected


@pytest.mark.usefixtures("quick")
def test_the_watch_goes_on_past_a_clean_end_a_quiet_spell_and_a_dropped_connection() -> None:
    handler, asked = streams(
        Chunks(event("Running")),
        Chunks(event("Running"), then=httpx.ReadTimeout("quiet")),
        Chunks(event("Running"), event("Restarting"), then=httpx.RemoteProtocolError("dropped")),
        Chunks(event("Restarting"), event("Succeeded")),
    )
    seen = [job.status.phase.value for job in Client(rest(handler)).watch("a", timeout=30) if job.status]
    assert seen == ["Pending", "Running", "Restarting", "Succeeded"] and len(asked) == 4


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        pytest.param(httpx.ConnectError("refused"), Unavailable, id="no connection"),
        pytest.param(httpx.ReadTimeout("silent"), Unavailable, id="no answer in time"),
    ],
)
def test_an_api_that_never_answered_the_watch_is_an_error_at_once(error: Exception, kind: type[Exception]) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise error

    with pytest.raises(kind):
        list(rest(refuse).watch("a", timeout=30))


@pytest.mark.parametrize(
    ("body", "kind", "words"),
    [
        pytest.param(b"event: status\ndata: {not json\n\n", TrainingJobError, "not a job", id="not JSON"),
        pytest.param(b"event: status\ndata: [1]\n\n", TrainingJobError, "not a job", id="not an object"),
        pytest.param(event("Running", "deleted"), NotFound, "was deleted", id="deleted"),
    ],
)
def test_what_the_watch_stream_says_besides_a_job(body: bytes, kind: type[Exception], words: str) -> None:
    handler, _ = streams(Chunks(body))
    with pytest.raises(kind, match=words) as raised:
        list(rest(handler).watch("a", timeout=30))
    assert type(raised.value) is kind


@pytest.mark.usefixtures("quick")
@pytest.mark.parametrize(
    ("then", "headers", "kind", "words"),
    [
        pytest.param(
            Chunks(b"<html>app</html>\n"), {"Content-Type": "text/html"}, TrainingJobError,
            "answered the watch with text/html, not text/event-stream", id="a web page",
        ),
        pytest.param(Chunks(), SSE, Unavailable, "ended the watch .* before it sent the job", id="an empty stream"),
        pytest.param(Chunks(b'event: status\ndata: {"a":'), SSE, Unavailable, "before it sent", id="a cut-off event"),
        pytest.param(Chunks(b": keepalive\n\n"), SSE, Unavailable, "before it sent the job", id="keepalives only"),
        pytest.param(httpx.ReadTimeout("no headers"), SSE, Unavailable, "unreachable", id="no answer"),
    ],
)  # fmt: skip
def test_a_watch_whose_streams_never_send_the_job_fails(
    then: Chunks | Exception, headers: dict[str, str], kind: type[Exception], words: str
) -> None:
    handler, asked = streams(Chunks(event("Running")), then, headers=headers)
    with pytest.raises(kind, match=words) as raised:
        list(rest(handler).watch("a", timeout=5))
    assert type(raised.value) is kind and asked


def test_wait_with_no_time_left_still_reads_the_job_once() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        assert not request.url.path.endswith("/watch"), "watched with no time left"
        return httpx.Response(200, json=job_manifest("a") | {"status": {"phase": "Succeeded", "attempt": 1}})

    assert str(Client(rest(answer)).wait("a", timeout=0).status.phase) == "Succeeded"  # type: ignore[union-attr]


def test_streams_that_end_at_once_are_opened_again_after_growing_pauses() -> None:
    handler, asked = streams(Chunks(event("Running"), b": keepalive\n\n"))
    list(rest(handler).watch("a", timeout=1.2))
    assert 2 <= len(asked) <= 4, len(asked)


@contextmanager
def serving(write: Callable[[Callable[[bytes], None], threading.Event], None]) -> Iterator[str]:
    """A local HTTP server answering every GET with an event stream that `write` writes (given a chunk writer and
    an event set when the test is over); its URL."""
    over = threading.Event()

    class Stream(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_: Any) -> None:
            pass

        def do_GET(self) -> None:
            if not self.path.endswith("/watch"):
                body = json.dumps(job_manifest("a") | {"status": {"phase": "Running", "attempt": 1}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()

            def chunk(data: bytes) -> None:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

            with suppress(OSError):  # the client went away
                write(chunk, over)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Stream)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        over.set()
        server.shutdown()
        server.server_close()


# Seconds: long past the deadline below (0.7 s) for a busy machine, long before the streams below would let a wait
# end that misses it (30 s, never).
PROMPTLY = 5.0


def silent(chunk: Callable[[bytes], None], over: threading.Event) -> None:
    chunk(event("Running"))
    over.wait(30)  # then nothing, as an API whose keepalives come less often than the caller waits


def keepalives(chunk: Callable[[bytes], None], over: threading.Event) -> None:
    chunk(event("Running"))
    while not over.wait(0.05):
        chunk(b": keepalive\n\n")


@pytest.mark.parametrize("write", [silent, keepalives], ids=["silent", "keepalives"])
def test_wait_times_out_at_its_deadline_whatever_the_stream_does(
    write: Callable[[Callable[[bytes], None], threading.Event], None],
) -> None:
    with serving(write) as url, Client(RestJobs(url, "token")) as client:
        started = time.monotonic()
        with pytest.raises(WaitTimeout, match=r"did not reach the end .* in \d+ s") as late:
            client.wait("a", timeout=0.7)
    assert late.value.job is not None
    assert time.monotonic() - started < PROMPTLY  # at the deadline, not when the stream next says something


DEADLINE = 3.0  # seconds: long enough that the two ways to end below are well apart on a busy machine


def slow_keepalives(chunk: Callable[[bytes], None], over: threading.Event) -> None:
    """A keepalive just before the wait's deadline, then the next as long after."""
    chunk(event("Running"))
    while not over.wait(DEADLINE - 0.1):
        chunk(b": keepalive\n\n")


def test_wait_ends_at_its_deadline_between_keepalives() -> None:
    """Not a read timeout after the keepalive just before it (twice the deadline in), nor at the next keepalive."""
    with serving(slow_keepalives) as url, Client(RestJobs(url, "token")) as client:
        started = time.monotonic()
        with pytest.raises(WaitTimeout):
            client.wait("a", timeout=DEADLINE)
        assert time.monotonic() - started < DEADLINE * 1.5
