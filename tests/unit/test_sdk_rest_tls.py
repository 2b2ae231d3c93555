"""A REST API whose TLS certificate the client refuses is told apart from one it cannot reach: a real HTTPS server
on 127.0.0.1 with a certificate that does not name it, or from a CA the client was not given, makes the SDK (and
tjctl) say which and what to do; a certificate it accepts gets past TLS to the server's answer."""

from pathlib import Path

import pytest
from testbed.pki import Authority
from tests.support.https import https

from tjctl import cli
from trainingjob_sdk import Client, NotConfigured, TrainingJobError
from trainingjob_sdk.rest_watch import UNTRUSTED_CERTIFICATE

pytestmark = pytest.mark.fast


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
