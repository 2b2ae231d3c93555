"""A job followed through the REST API's server-sent events: read first (so that a deadline of 0 still looks once),
then watched, the stream opened again when it ends, goes quiet or drops (see deadline.Retry). A stream is a working
one once it has sent the job: one that ends or goes quiet before, or an answer that never comes, is a failure, and
failures with nothing answered between for deadline.LONGEST_OUTAGE seconds are Unavailable."""

import socket
import ssl
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING

import httpx

from trainingjob_sdk.deadline import Deadline, Retry, followed
from trainingjob_sdk.errors import (
    NotConfigured,
    NotFound,
    TrainingJobError,
    Unavailable,
    one_line,
    refused_certificate,
    unreachable_reason,
)
from trainingjob_sdk.jobs import Manifest, describe_job, json_object

if TYPE_CHECKING:
    from trainingjob_sdk.rest import RestJobs

KEEPALIVE_GRACE = 60.0  # the API sends a keepalive comment every few seconds on a watch: none for this long is a loss
EVENT_STREAM = "text/event-stream"
UNTRUSTED_CERTIFICATE = "UntrustedCertificate"  # NotConfigured's reason: the server's certificate was refused
# OpenSSL's verify codes: the certificate names another host; it comes from a CA the client does not trust
NAMES_ANOTHER_HOST = {62, 64}  # X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH
UNKNOWN_ISSUER = {2, 18, 19, 20, 21}  # ..._UNABLE_TO_GET_ISSUER_CERT, ..._SELF_SIGNED_..., ..._VERIFY_LEAF_SIGNATURE


@contextmanager
def answering(server: str) -> Iterator[None]:
    try:
        yield
    except httpx.TransportError as error:
        refusal = refused_certificate(error)
        if refusal is not None:
            raise NotConfigured(untrusted(server, refusal), reason=UNTRUSTED_CERTIFICATE) from None
        raise Unavailable(f"the REST API at {server} is unreachable: {unreachable_reason(error)}") from None
    except httpx.DecodingError as error:
        message = f"the REST API at {server} sent an answer that cannot be decoded: {one_line(str(error))}"
        raise TrainingJobError(message, reason="BadResponse") from None


def untrusted(server: str, refusal: ssl.SSLCertVerificationError) -> str:
    """Why the client refused the certificate of the REST API at `server`, and what to do about it."""
    host = httpx.URL(server).host
    said = str(refusal.verify_message or refusal.reason or refusal).rstrip(".")
    refused = f"the REST API at {server} answered, but its TLS certificate"
    if refusal.verify_code in NAMES_ANOTHER_HOST:
        return (
            f"{refused} does not name {host} (hostname mismatch): connect by a name the certificate holds, or give "
            f"the API a certificate that names {host} (the chart's names localhost and 127.0.0.1 for a port-forward; "
            "one an older chart made keeps its names until its Secret is deleted and the release upgraded)"
        )
    if refusal.verify_code in UNKNOWN_ISSUER:
        return (
            f"{refused} is signed by a CA this client does not trust ({said}): pass that CA's certificate (tjctl "
            "--cacert FILE, $TJCTL_CACERT, the SDK's cacert=); the chart's NOTES show the command that saves it"
        )
    return f"{refused} was refused ({said})"


def sse_events(lines: Iterable[str]) -> Iterator[tuple[str, str]]:
    """Server-sent events (text/event-stream) as (event name, data): the data lines of an event joined by newlines
    up to the blank line that ends it, 'data:' with or without a space; comments (':...') and other fields are
    skipped, an event without data is not one, and the name is reset after each (unnamed: 'message')."""
    name, data = "", list[str]()
    for line in lines:
        if not line:
            if data:
                yield name or "message", "\n".join(data)
            name, data = "", []
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            name = value
        elif field == "data":
            data.append(value)


def _shut(connection: socket.socket) -> None:
    with suppress(OSError):
        connection.shutdown(socket.SHUT_RDWR)


@contextmanager
def cut_at(deadline: Deadline, response: httpx.Response) -> Iterator[None]:
    """Shut the response's connection down when the deadline passes: a read waiting for the next keepalive ends
    then, not up to a keepalive interval later."""
    stream = response.extensions.get("network_stream")
    connection = stream.get_extra_info("socket") if stream is not None and deadline.at is not None else None
    if connection is None:
        yield
        return
    timer = threading.Timer(deadline.left(KEEPALIVE_GRACE * 1e6), _shut, (connection,))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


class RestWatch:
    """One job's watch through `jobs`, a RestJobs."""

    def __init__(self, jobs: "RestJobs", name: str, namespace: str) -> None:
        self.jobs, self.name, self.namespace = jobs, name, namespace
        self.what = describe_job(namespace, name)
        self.got = False  # whether the stream now open has sent the job

    def follow(self, seconds: float | None) -> Iterator[Manifest]:
        """The job now, then every new status of it, until `seconds` have passed (forever when None); NotFound
        once it is deleted."""
        return followed(seconds, lambda: self.jobs.get(self.name, self.namespace), self._stream)

    def _stream(self, deadline: Deadline, retry: Retry) -> Iterator[Manifest]:
        """The jobs of one event stream, until it ends, the deadline passes or nothing comes for KEEPALIVE_GRACE
        seconds; Unavailable if it ends so before it sent the job."""
        self.got = False
        server = self.jobs.server
        with answering(server):
            try:
                yield from self._events(deadline, retry)
            except httpx.ReadTimeout:
                if not (self.got or deadline.passed()):
                    raise
                return
        if not (self.got or deadline.passed()):
            raise Unavailable(f"the REST API at {server} ended the watch of {self.what} before it sent the job")

    def _events(self, deadline: Deadline, retry: Retry) -> Iterator[Manifest]:
        jobs = self.jobs
        timeout = httpx.Timeout(jobs.timeout, read=max(0.001, deadline.left(KEEPALIVE_GRACE)))
        path = f"{jobs.path(self.namespace, self.name)}/watch"
        with jobs.http.stream("GET", path, timeout=timeout) as response, cut_at(deadline, response):
            jobs.check(response)
            kind = response.headers.get("content-type", "")
            if kind.partition(";")[0].strip().lower() != EVENT_STREAM:
                message = f"the REST API at {jobs.server} answered the watch with {kind or 'no content type'}, not"
                raise TrainingJobError(
                    f"{message} {EVENT_STREAM}: is {jobs.server} the REST API's URL?", status=response.status_code,
                    reason="BadResponse",
                )  # fmt: skip
            for event, data in sse_events(self._lines(response, deadline, retry)):
                if event == "deleted":
                    raise NotFound(f"{self.what} was deleted", status=404)
                if event in ("status", "message"):
                    self.got = True
                    retry.answered()
                    yield json_object(data, f"the REST API at {jobs.server} sent a watch event that is not a job")

    def _lines(self, response: httpx.Response, deadline: Deadline, retry: Retry) -> Iterator[str]:
        """The stream's lines until it ends or the deadline passes; a keepalive after the job is an answer."""
        for line in response.iter_lines():
            yield line
            if line.startswith(":") and self.got:
                retry.answered()
            if deadline.passed():
                return
