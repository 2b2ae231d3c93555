"""A real HTTPS server on 127.0.0.1 with a certificate of the test's choosing: what the SDK's TLS checks meet."""

import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from testbed.pki import CertPair


class Answers(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(418)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def https(pair: CertPair) -> Iterator[str]:
    """An HTTPS server on 127.0.0.1 presenting `pair`, answering every GET 418; its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Answers)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pair.cert, pair.key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
