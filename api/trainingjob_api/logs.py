"""Pod logs relayed without a thread per stream: an async HTTP client to the apiserver with the API's own
credentials, acting as the caller, and a bound on how many log streams one caller, and all callers together, may
follow at once."""

import logging
import ssl
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import httpx
from kubernetes.client.rest import should_bypass_proxies
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from trainingjob.kube.impersonation import Headers
from trainingjob_api.problems import ApiError

log = logging.getLogger(__name__)


class StreamSlots:
    """Counts the open streams (followed logs and watches), per caller and in all; refuses (429) one over either
    bound."""

    def __init__(self, per_caller: int, total: int) -> None:
        self._per_caller, self._total = per_caller, total
        self._held: Counter[str] = Counter()
        self._lock = threading.Lock()

    @property
    def open(self) -> int:
        with self._lock:
            return self._held.total()

    def take(self, caller: str) -> Callable[[], None]:
        """One slot for `caller`, or ApiError 429; returns its release, which may be called more than once."""
        with self._lock:
            if self._held[caller] >= self._per_caller:
                held = f"{self._per_caller} streams (followed logs, watches)"
                message = f'user "{caller}" holds {held} already, the most one caller may'
                raise ApiError(429, "TooManyRequests", f"{message}; close one first")
            if self._held.total() >= self._total:
                held = f"{self._total} streams (followed logs, watches)"
                message = f"{held} are open on this server already, the most it allows"
                raise ApiError(429, "TooManyRequests", f"{message}; try again later")
            self._held[caller] += 1
        released = threading.Event()

        def release() -> None:
            with self._lock:
                if not released.is_set():
                    released.set()
                    self._held[caller] -= 1
                    if not self._held[caller]:
                        del self._held[caller]

        return release


def _tls(configuration: Any) -> ssl.SSLContext:
    """The TLS settings of the Kubernetes client's configuration: its CA, its client certificate if any."""
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file)
    return context


def _proxy(configuration: Any) -> str | None:
    """The proxy the Kubernetes client itself would use for the apiserver, if any."""
    proxy: str | None = configuration.proxy
    return None if not proxy or should_bypass_proxies(configuration.host, configuration.no_proxy or "") else proxy


class PodLogs:
    """GET /api/v1/namespaces/{namespace}/pods/{pod}/log through the apiserver, as an open streamed response."""

    def __init__(self, configuration: Any, timeout: float) -> None:
        self._configuration, self._timeout = configuration, timeout
        self._client = httpx.AsyncClient(
            base_url=configuration.host, verify=_tls(configuration), proxy=_proxy(configuration), trust_env=False,
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=8),
        )  # fmt: skip

    async def open(self, namespace: str, pod: str, params: dict[str, str | int], acting: Headers) -> httpx.Response:
        """The log response, status and headers read, its body not yet (the caller closes it); asked as the user
        the `acting` headers impersonate."""
        auth = self._configuration.auth_settings().values()
        headers = [(each["key"], each["value"]) for each in auth if each["in"] == "header"]
        follow = params.get("follow") == "true"
        request = self._client.build_request(
            "GET", f"/api/v1/namespaces/{namespace}/pods/{pod}/log", params=params,
            # identity: compressed, a followed log would come in lumps
            headers=[*headers, ("Accept-Encoding", "identity"), *acting],
            timeout=httpx.Timeout(self._timeout, read=None if follow else self._timeout),
            extensions={"sni_hostname": name} if (name := self._configuration.tls_server_name) else None,
        )  # fmt: skip
        return await self._client.send(request, stream=True)

    async def aclose(self) -> None:
        await self._client.aclose()


class LogStream(StreamingResponse):
    """An open log response relayed to the caller; however it ends (its end, an error, the caller leaving),
    the connection to Kubernetes is closed and the caller's slot freed."""

    def __init__(
        self, upstream: httpx.Response, release: Callable[[], None],
        wrap: Callable[[AsyncIterator[bytes]], AsyncIterator[bytes]] = lambda chunks: chunks,
    ) -> None:  # fmt: skip
        super().__init__(wrap(_relay(upstream)), media_type="text/plain")
        self._upstream, self._release = upstream, release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()
            with anyio.CancelScope(shield=True):
                await self._upstream.aclose()


async def _relay(upstream: httpx.Response) -> AsyncIterator[bytes]:
    try:
        async for chunk in upstream.aiter_raw():
            yield chunk
    except httpx.TransportError as error:  # the headers are sent: all that is left is to end the stream
        log.info("a log stream from Kubernetes broke off: %r", error)
