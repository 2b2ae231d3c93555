"""A REST API whose TLS certificate the client refuses is told apart from one it cannot reach: a real HTTPS server
on 127.0.0.1 with a certificate that does not name it, or from a CA the client was not given, makes the SDK (and
tjctl) say which and what to do; a certificate it accepts gets past TLS to the server's answer."""

import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from tests.support.pki import Authority, CertPair

from tjctl import cli
from trainingjob_sdk import Client, NotConfigured, TrainingJobError
from trainingjob_sdk.rest_watch import UNTRUSTED_CERTIFICATE


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


@pytest.fixture(scope="module")
def authority(tmp_path_factory: pytest.TempPathFactory) -> Authority:
    return Authority(tmp_path_factory.mktemp("pki"))


def refusal(server: str, cacert: Path | None) -> TrainingJobError:
    with Client.rest(server, "token", cacert=cacert) as client, pytest.raises(TrainingJobError) as raised:
        client.list()
    return raised.value


def test_a_certificate_that_does_not_name_the_host_is_a_hostname_mismatch(authority: Authority) -> None:
    elsewhere = authority.issue("in-cluster", "trainingjob-api", server=True, loopback=False)
    with https(elsewhere) as server:
        error = refusal(server, authority.cert)
    assert isinstance(error, NotConfigured) and error.reason == UNTRUSTED_CERTIFICATE, error
    assert "does not name 127.0.0.1 (hostname mismatch)" in error.message
    assert "unreachable" not in error.message and "localhost and 127.0.0.1" in error.message


def test_a_certificate_from_a_ca_not_given_says_to_pass_it(authority: Authority) -> None:
    here = authority.issue("loopback", "trainingjob-api", server=True)
    with https(here) as server:
        error = refusal(server, None)  # the system's CAs: not ours
    assert isinstance(error, NotConfigured) and error.reason == UNTRUSTED_CERTIFICATE, error
    assert "signed by a CA this client does not trust" in error.message and "--cacert" in error.message


def test_an_accepted_certificate_gets_the_servers_answer(authority: Authority) -> None:
    here = authority.issue("loopback", "trainingjob-api", server=True)
    with https(here) as server:
        error = refusal(server, authority.cert)
    assert error.status == 418, error  # past TLS: what the server said


def test_tjctl_says_it_in_one_line(authority: Authority, capsys: pytest.CaptureFixture[str]) -> None:
    elsewhere = authority.issue("in-cluster", "trainingjob-api", server=True, loopback=False)
    with https(elsewhere) as server:
        code = cli.main(["--server", server, "--token", "t", "--cacert", str(authority.cert), "list"])
    said = capsys.readouterr().err
    assert code == 4 and len(said.strip().splitlines()) == 1, said
    assert "does not name 127.0.0.1 (hostname mismatch)" in said and "Traceback" not in said
