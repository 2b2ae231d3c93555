"""python -m trainingjob_api: serve the REST API with uvicorn, configured by TJ_API_* variables."""

import ipaddress
import logging
import sys
from typing import Any

import uvicorn

from trainingjob_api.app import create_app
from trainingjob_api.settings import ApiSettings


class TlsSettingsError(ValueError):
    """The settings would serve bearer tokens in clear text, or name only half a certificate."""


def server_options(settings: ApiSettings) -> dict[str, Any]:
    """uvicorn's options: HTTPS with the certificate, else plain HTTP on loopback or when explicitly allowed."""
    cert, key = settings.tls_cert_file, settings.tls_key_file
    if (cert is None) != (key is None):
        raise TlsSettingsError("set both TJ_API_TLS_CERT_FILE and TJ_API_TLS_KEY_FILE, or neither")
    options: dict[str, Any] = {"host": settings.host, "port": settings.port, "proxy_headers": False}
    if cert is not None:
        return options | {"ssl_certfile": str(cert), "ssl_keyfile": str(key)}
    if not (settings.plain_http or _is_loopback(settings.host)):
        raise TlsSettingsError(
            f"refusing to serve plain HTTP on {settings.host}: set TJ_API_TLS_CERT_FILE and TJ_API_TLS_KEY_FILE, "
            "or TJ_API_PLAIN_HTTP=true behind a proxy that terminates TLS"
        )
    return options


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = ApiSettings()
    try:
        options = server_options(settings)
    except TlsSettingsError as error:
        sys.exit(f"trainingjob_api: {error}")
    uvicorn.run(create_app(settings), **options)


if __name__ == "__main__":
    main()
