"""TrainingJobs through the project's REST API, as a bearer-token caller: the same methods as KubeJobs."""

import codecs
import ipaddress
import json
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from trainingjob_sdk import pods
from trainingjob_sdk.errors import FieldError, Invalid, NotConfigured, TrainingJobError, for_status
from trainingjob_sdk.jobs import Manifest, Manifests
from trainingjob_sdk.rest_watch import RestWatch, answering, sse_events

__all__ = ["BAD_CA", "BAD_SERVER", "BAD_TOKEN", "RestJobs", "answering", "problem", "sse_events"]

SCHEMES = ("http", "https")
# The API refuses a POST, PUT, PATCH or DELETE without this header (trainingjob_api.writes): no web form sends one.
SAME_SITE = {"X-Requested-With": "trainingjob-sdk"}
# NotConfigured's reasons for what the caller named
BAD_SERVER, BAD_CA, BAD_TOKEN = "InvalidServerURL", "InvalidCACert", "InvalidToken"


def problem(response: httpx.Response) -> TrainingJobError:
    """The REST API's error body (status, reason, message, fields) as the SDK's error."""
    try:
        body = json.loads(response.read() or b"{}")
    except ValueError:
        body = {}
    body = body if isinstance(body, dict) else {}
    message = str(body.get("message") or response.reason_phrase or f"HTTP {response.status_code}")
    reason = body.get("reason")
    if response.status_code in (400, 422):
        fields = [FieldError(str(f.get("field", "")), str(f.get("message", ""))) for f in body.get("fields") or []]
        return Invalid(message, fields, status=response.status_code, reason=reason)
    return for_status(response.status_code, message, reason)


def _base(server: str) -> str:
    """`server` as the base of every request: an http:// or https:// URL with a host; NotConfigured otherwise."""
    text = server.strip().rstrip("/")
    try:
        url: httpx.URL | None = httpx.URL(text)
    except httpx.InvalidURL:
        url = None
    if url is None or url.scheme not in SCHEMES or not url.host:
        message = f"the REST API's URL {server!r} must start with http:// or https:// and name a host"
        raise NotConfigured(message, reason=BAD_SERVER)
    return text


def _verify(cacert: str | Path | None) -> ssl.SSLContext | bool:
    """The TLS verification: the system's CAs, or only the CA certificates (PEM) in `cacert`."""
    if not cacert:
        return True
    try:
        return ssl.create_default_context(cafile=str(cacert))
    except ssl.SSLError as error:
        raise NotConfigured(
            f"the CA file {cacert} holds no PEM certificate ({error.reason or error})", reason=BAD_CA
        ) from None
    except OSError as error:
        raise NotConfigured(f"the CA file {cacert} cannot be read: {error.strerror or error}", reason=BAD_CA) from None


def _loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class RestJobs:
    """The jobs the REST API at `server` (e.g. https://127.0.0.1:8000) serves to the holder of `token`."""

    def __init__(
        self, server: str, token: str, namespace: str | None = None, *, cacert: str | Path | None = None,
        timeout: float | None = 30.0, transport: httpx.BaseTransport | None = None,
    ) -> None:  # fmt: skip
        if not (token.isascii() and token.isprintable()):  # it goes into a header as it is
            raise NotConfigured("the token must be printable ASCII: no other letters, no newline", reason=BAD_TOKEN)
        self.server, self.namespace, self.timeout = _base(server), namespace or "default", timeout
        self.http = httpx.Client(
            base_url=f"{self.server}/api/v1", headers={"Authorization": f"Bearer {token}", **SAME_SITE},
            verify=_verify(cacert), timeout=timeout, transport=transport,
        )  # fmt: skip

    @property
    def unencrypted(self) -> bool:
        """Whether the token travels in clear text to another machine: http:// to a host that is not loopback."""
        url = httpx.URL(self.server)
        return url.scheme == "http" and not _loopback(url.host)

    def close(self) -> None:
        self.http.close()

    def _ns(self, namespace: str | None) -> str:
        return namespace or self.namespace

    def path(self, namespace: str | None, name: str = "") -> str:
        return f"/namespaces/{self._ns(namespace)}/trainingjobs" + (f"/{name}" if name else "")

    def check(self, response: httpx.Response) -> None:
        """Raise for an answer that is no success: a redirect (NotConfigured: use the URL it names) or an error."""
        if 300 <= response.status_code < 400:
            location = response.headers.get("location")
            target = str(response.url.join(location)) if location else ""
            base = target[: target.find("/api/v1")] if "/api/v1" in target else target
            said = f"{response.status_code} {response.reason_phrase}".strip()
            where = f"it points to {base}: use that URL" if base else "it does not say where to"
            raise NotConfigured(f"the REST API at {self.server} answered {said}: {where}")
        if response.status_code >= 400:
            raise problem(response)

    def _json(self, response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError:
            kind = response.headers.get("content-type") or "no content type"
            message = f"the REST API at {self.server} answered {response.status_code} with {kind}, not JSON"
            raise TrainingJobError(
                f"{message}: is {self.server} the REST API's URL?", status=response.status_code, reason="BadResponse"
            ) from None

    def _bad(self, what: str, found: Any) -> TrainingJobError:
        text = json.dumps(found)
        shown = text if len(text) <= 100 else text[:100] + "..."
        return TrainingJobError(f"the REST API at {self.server} sent {what}: {shown}", reason="BadResponse")

    def _object(self, found: Any, what: str) -> Manifest:
        """`found` as the JSON object it should be; BadResponse otherwise."""
        if not isinstance(found, dict):
            raise self._bad(f"{what} that is not a JSON object", found)
        return found

    def _job(self, found: Any) -> Manifest:
        """`found` as a job (an object with metadata.name); BadResponse otherwise."""
        job = self._object(found, "a job")
        metadata = job.get("metadata")
        if not (isinstance(metadata, dict) and isinstance(metadata.get("name"), str) and metadata["name"]):
            raise self._bad("a job without metadata.name", found)
        return job

    def _items(self, found: Any, what: str) -> Manifests:
        """The `items` of a list answer, each an object; BadResponse otherwise."""
        items = self._object(found, f"a list of {what}").get("items")
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            raise self._bad(f"a list of {what} whose items are not JSON objects", found)
        return items

    def _call(self, method: str, path: str, **options: Any) -> Any:
        with answering(self.server):
            response = self.http.request(method, path, **options)
            self.check(response)
        return self._json(response)

    def create(self, body: Manifest, namespace: str | None = None) -> Manifest:
        return self._job(self._call("POST", self.path(namespace), json=body))

    def get(self, name: str, namespace: str | None = None) -> Manifest:
        return self._job(self._call("GET", self.path(namespace, name)))

    def list(
        self, namespace: str | None = None, selector: str | None = None, *, all_namespaces: bool = False
    ) -> Manifests:
        """Every matching job, read in pages."""
        path = "/trainingjobs" if all_namespaces else self.path(namespace)
        items: Manifests = []
        token = None
        while True:
            params = (
                {"limit": 500}
                | ({"labelSelector": selector} if selector else {})
                | ({"continue": token} if token else {})
            )
            page = self._call("GET", path, params=params)
            items += [self._job(item) for item in self._items(page, "jobs")]
            metadata = page.get("metadata")
            token = metadata.get("continue") if isinstance(metadata, dict) else None
            if not token:
                return items

    def delete(self, name: str, namespace: str | None = None) -> None:
        self._call("DELETE", self.path(namespace, name))

    def set_suspend(self, name: str, suspend: bool, namespace: str | None = None) -> Manifest:
        return self._job(self._call("POST", f"{self.path(namespace, name)}/{'suspend' if suspend else 'resume'}"))

    def watch(self, name: str, namespace: str | None = None, timeout: float | None = None) -> Iterator[Manifest]:
        """The job now, then every new status of it (the API's server-sent events), until `timeout` seconds have
        passed (forever when None); NotFound once it is deleted. See rest_watch."""
        return RestWatch(self, name, self._ns(namespace)).follow(timeout)

    def events(self, name: str, namespace: str | None = None) -> Manifests:
        return self._items(self._call("GET", f"{self.path(namespace, name)}/events"), "events")

    def failure(self, name: str, namespace: str | None = None) -> Manifest | None:
        """The job's status.lastFailure with its logTail, which the job as GET returns it leaves out (the API shows
        a rank's log lines only to callers who may read pod logs)."""
        found = self._object(self._call("GET", f"{self.path(namespace, name)}/failure"), "a failure")
        failure = found.get("lastFailure")
        return failure if isinstance(failure, dict) else None

    def pods(self, name: str, namespace: str | None = None) -> Manifests:
        """The job's pods as the dashboard lists them (rows, not pod objects)."""
        return self._items(self._call("GET", f"{self.path(namespace, name)}/pods"), "pods")

    def logs(
        self, name: str, namespace: str | None = None, *, replica: str = "worker-0", follow: bool = False,
        tail: int | None = None, attempt: int | None = None,
    ) -> Iterator[str]:  # fmt: skip
        """The log of one replica's pod, as text as it comes (uncompressed: a followed log line by line)."""
        pods.parse_replica(replica)
        params: dict[str, Any] = {"replica": replica, "follow": str(follow).lower()}
        params |= ({"tailLines": tail} if tail is not None else {}) | (
            {"attempt": attempt} if attempt is not None else {}
        )
        timeout = httpx.Timeout(self.timeout, read=None if follow else self.timeout)
        request = self.http.build_request(
            "GET", f"{self.path(namespace, name)}/logs", params=params, timeout=timeout,
            headers={"Accept-Encoding": "identity"},
        )  # fmt: skip
        with answering(self.server):
            response = self.http.send(request, stream=True)
            try:
                self.check(response)  # reads an error's body: inside `answering`, as any read
            except BaseException:
                response.close()
                raise
        return self._text(response)

    def _text(self, response: httpx.Response) -> Iterator[str]:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        try:
            with answering(self.server):
                for chunk in response.iter_bytes():
                    yield decoder.decode(chunk)
            yield decoder.decode(b"", final=True)
        finally:
            response.close()

    def timeline(self, name: str, namespace: str | None = None, *, chrome: bool = False) -> Manifest:
        found = self._call(
            "GET", f"{self.path(namespace, name)}/timeline", params={"format": "chrome" if chrome else "json"}
        )
        return self._object(found, "a timeline")
