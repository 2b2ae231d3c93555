"""A threading HTTP server for clients it does not trust, as the in-place agent's endpoint and rank 0's progress
endpoint are: at most `max_connections` requests in flight (the one over answers 503 at once and is closed), a
socket timeout per request (REQUEST_TIMEOUT_SECONDS: an idle or dripping client loses its connection, and its
thread, then), threads that never hold the process up."""

import contextlib
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socket import socket
from typing import Any

from trainer.contract import LISTEN_ADDRESS

REQUEST_TIMEOUT_SECONDS = 10.0
PENDING_BYTES = 64 << 10
_BUSY = b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n"


def discard_pending(sock: socket) -> None:
    """Read (at most 64 KiB of) what a client already sent and will not be read: closing a connection on unread
    bytes resets it, and the client would miss its answer. Never waits."""
    with contextlib.suppress(OSError):
        sock.setblocking(False)
        sock.recv(PENDING_BYTES)
        sock.settimeout(REQUEST_TIMEOUT_SECONDS)


def listen_address() -> str:
    """Where the trainer's servers listen: TJ_LISTEN_ADDRESS (local mode: loopback only), else every interface (a
    pod is reached on its IP, and its NetworkPolicy says by whom)."""
    return os.environ.get(LISTEN_ADDRESS, "").strip() or "0.0.0.0"


class BoundedHTTPServer(ThreadingHTTPServer):
    """A ThreadingHTTPServer on listen_address() with at most `max_connections` requests in flight; its handler's
    `timeout` should be REQUEST_TIMEOUT_SECONDS (BoundedHandler's is)."""

    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, port: int, handler: type[BaseHTTPRequestHandler], max_connections: int) -> None:
        self._slots = threading.BoundedSemaphore(max_connections)
        super().__init__((listen_address(), port), handler)

    @property
    def port(self) -> int:
        """The port it listens on (the one picked when asked for 0)."""
        return int(self.server_address[1])

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            with contextlib.suppress(OSError):
                sock: socket = request
                sock.settimeout(1.0)
                sock.sendall(_BUSY + b'{"error": "busy"}')
            discard_pending(request)
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


class BoundedHandler(BaseHTTPRequestHandler):
    """A request handler whose reads and writes give up after REQUEST_TIMEOUT_SECONDS of silence."""

    timeout = REQUEST_TIMEOUT_SECONDS
