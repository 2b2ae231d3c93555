"""How `python -m trainingjob_api` serves: HTTPS with a certificate; plain HTTP only on loopback or when told it
sits behind a TLS-terminating proxy; never with half a certificate."""

from pathlib import Path
from typing import Any

import pytest

from trainingjob_api.__main__ import TlsSettingsError, server_options
from trainingjob_api.settings import ApiSettings

pytestmark = pytest.mark.fast

CERT, KEY = Path("/tls/tls.crt"), Path("/tls/tls.key")


@pytest.mark.parametrize(
    ("settings", "tls"),
    [
        pytest.param({"host": "0.0.0.0", "tls_cert_file": CERT, "tls_key_file": KEY}, True, id="certificate"),
        pytest.param({"host": "127.0.0.1"}, False, id="loopback"),
        pytest.param({"host": "::1"}, False, id="loopback-v6"),
        pytest.param({"host": "0.0.0.0", "plain_http": True}, False, id="behind-a-proxy"),
    ],
)
def test_how_it_serves(settings: dict[str, Any], tls: bool) -> None:
    options = server_options(ApiSettings(**settings))
    assert ("ssl_certfile" in options) == tls and options["host"] == settings["host"]
    if tls:
        assert (options["ssl_certfile"], options["ssl_keyfile"]) == (str(CERT), str(KEY))


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        pytest.param({"host": "0.0.0.0"}, "TJ_API_PLAIN_HTTP", id="clear-text-tokens"),
        pytest.param({"host": "0.0.0.0", "tls_cert_file": CERT}, "TJ_API_TLS_KEY_FILE", id="no-key"),
        pytest.param({"host": "127.0.0.1", "tls_key_file": KEY}, "TJ_API_TLS_CERT_FILE", id="no-cert"),
    ],
)
def test_refused_settings_name_what_to_set(settings: dict[str, Any], named: str) -> None:
    with pytest.raises(TlsSettingsError, match=named):
        server_options(ApiSettings(**settings))
