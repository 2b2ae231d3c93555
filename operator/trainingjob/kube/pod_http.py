"""One HTTP exchange with a pod (rank 0's progress endpoint, its agent): a pod is untrusted, so the whole exchange,
from connect through the status line and headers to the body's last byte, is bounded by one deadline and a byte
budget. http.client bounds each read, not the exchange: a pod that dripped a header byte a second held the caller
as long as it liked.

The request says `Connection: close`; the answer ends at its Content-Length or when the pod closes. Chunked answers
are refused (our servers do not send them)."""

import re
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass

HEADER_BYTES = 16 * 1024  # the status line and headers a pod may send beside the body's budget
_STATUS = re.compile(rb"HTTP/1\.[01] (\d{3})(?: [^\r\n]*)?")


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes


def exchange(
    host: str,
    port: int,
    method: str,
    path: str,
    *,
    limit: int,
    seconds: float,
    body: bytes = b"",
    headers: Mapping[str, str] | None = None,
) -> Answer | None:
    """The pod's answer within `seconds` in all and `limit` bytes of body, or None (no answer, too slow, too big,
    or not HTTP)."""
    deadline = time.monotonic() + seconds
    try:
        with socket.create_connection((host, port), timeout=seconds) as sock:
            sock.settimeout(_left(deadline))
            sock.sendall(_request(host, method, path, body, headers or {}))
            return _receive(sock, deadline, limit)
    except (OSError, ValueError):
        return None


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the pod's answer took too long")
    return left


def _request(host: str, method: str, path: str, body: bytes, headers: Mapping[str, str]) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}", "Connection: close", f"Content-Length: {len(body)}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def _receive(sock: socket.socket, deadline: float, limit: int) -> Answer | None:
    """Read until the answer is whole (its Content-Length, or the pod closed); None past the budget or the deadline."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = _read(sock, deadline)
        if not chunk or len(data) > HEADER_BYTES:
            return None
        data += chunk
    block, _, body = data.partition(b"\r\n\r\n")
    head = _head(block)
    if head is None or (head[1] is not None and head[1] > limit):
        return None
    status, length = head
    while length is None or len(body) < length:
        if len(body) > limit:
            return None
        chunk = _read(sock, deadline)
        if not chunk:
            return Answer(status, body) if length is None else None
        body += chunk
    return Answer(status, body[:length])


def _read(sock: socket.socket, deadline: float) -> bytes:
    sock.settimeout(_left(deadline))
    return sock.recv(65536)


def _head(block: bytes) -> tuple[int, int | None] | None:
    """(status, Content-Length or None) from the status line and headers; None when they are not HTTP we read."""
    lines = block.split(b"\r\n")
    matched = _STATUS.fullmatch(lines[0])
    if matched is None:
        return None
    length = None
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"transfer-encoding":
            return None
        if name == b"content-length":
            if not value.strip().isdigit():
                return None
            length = int(value.strip())
    return int(matched.group(1)), length
