"""TrainingJobs through the project's REST API, as a bearer-token caller: the same methods as KubeJobs."""

import codecs
import json
import ssl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from trainingjob_sdk import pods
from trainingjob_sdk.errors import (
    FieldError,
    Invalid,
    NotFound,
    TrainingJobError,
    Unavailable,
    for_status,
    unreachable_reason,
)
from trainingjob_sdk.jobs import Manifest, Manifests, describe_job

KEEPALIVE_GRACE = 60.0  # the API sends a keepalive comment every few seconds on a watch: none for this long is a loss


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


@contextmanager
def answering(server: str) -> Iterator[None]:
    try:
        yield
    except httpx.TransportError as error:
        raise Unavailable(f"the REST API at {server} is unreachable: {unreachable_reason(error)}") from None


class RestJobs:
    """The jobs the REST API at `server` (e.g. https://127.0.0.1:8000) serves to the holder of `token`."""

    def __init__(
        self, server: str, token: str, namespace: str | None = None, *, cacert: str | Path | None = None,
        timeout: float | None = 30.0,
    ) -> None:  # fmt: skip
        self.server, self.namespace, self.timeout = server.rstrip("/"), namespace or "default", timeout
        verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=str(cacert)) if cacert else True
        self.http = httpx.Client(
            base_url=f"{self.server}/api/v1", headers={"Authorization": f"Bearer {token}"}, verify=verify,
            timeout=timeout,
        )  # fmt: skip

    def close(self) -> None:
        self.http.close()

    def _ns(self, namespace: str | None) -> str:
        return namespace or self.namespace

    def _path(self, namespace: str | None, name: str = "") -> str:
        return f"/namespaces/{self._ns(namespace)}/trainingjobs" + (f"/{name}" if name else "")

    def _call(self, method: str, path: str, **options: Any) -> Any:
        with answering(self.server):
            response = self.http.request(method, path, **options)
        if response.status_code >= 400:
            raise problem(response)
        return response.json()

    def create(self, body: Manifest, namespace: str | None = None) -> Manifest:
        created: Manifest = self._call("POST", self._path(namespace), json=body)
        return created

    def get(self, name: str, namespace: str | None = None) -> Manifest:
        found: Manifest = self._call("GET", self._path(namespace, name))
        return found

    def list(
        self, namespace: str | None = None, selector: str | None = None, *, all_namespaces: bool = False
    ) -> Manifests:
        """Every matching job, read in pages."""
        path = "/trainingjobs" if all_namespaces else self._path(namespace)
        items: Manifests = []
        token = None
        while True:
            params = (
                {"limit": 500}
                | ({"labelSelector": selector} if selector else {})
                | ({"continue": token} if token else {})
            )
            page = self._call("GET", path, params=params)
            items += page.get("items", [])
            token = page["metadata"].get("continue")
            if not token:
                return items

    def delete(self, name: str, namespace: str | None = None) -> None:
        self._call("DELETE", self._path(namespace, name))

    def set_suspend(self, name: str, suspend: bool, namespace: str | None = None) -> Manifest:
        found: Manifest = self._call("POST", f"{self._path(namespace, name)}/{'suspend' if suspend else 'resume'}")
        return found

    def watch(self, name: str, namespace: str | None = None, timeout: float | None = None) -> Iterator[Manifest]:
        """The job now, then every new status of it (the API's server-sent events), until `timeout` seconds have
        passed (forever when None); NotFound once it is deleted."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while deadline is None or time.monotonic() < deadline:
            left = KEEPALIVE_GRACE if deadline is None else max(0.1, min(KEEPALIVE_GRACE, deadline - time.monotonic()))
            try:
                yield from self._events(name, namespace, httpx.Timeout(self.timeout, read=left), deadline)
            except httpx.ReadTimeout:
                continue  # nothing in `left` seconds: the deadline passed, or the watch is reopened
            return

    def _events(
        self, name: str, namespace: str | None, timeout: httpx.Timeout, deadline: float | None
    ) -> Iterator[Manifest]:
        with (
            answering(self.server),
            self.http.stream("GET", f"{self._path(namespace, name)}/watch", timeout=timeout) as response,
        ):
            if response.status_code >= 400:
                raise problem(response)
            event = ""
            for line in response.iter_lines():
                if line.startswith("event: "):
                    event = line.removeprefix("event: ")
                elif line.startswith("data: ") and event == "deleted":
                    raise NotFound(f"{describe_job(self._ns(namespace), name)} was deleted", status=404)
                elif line.startswith("data: "):
                    yield json.loads(line.removeprefix("data: "))
                if deadline is not None and time.monotonic() >= deadline:
                    return

    def events(self, name: str, namespace: str | None = None) -> Manifests:
        found: Manifest = self._call("GET", f"{self._path(namespace, name)}/events")
        return list(found["items"])

    def failure(self, name: str, namespace: str | None = None) -> Manifest | None:
        """The job's status.lastFailure with its logTail, which the job as GET returns it leaves out (the API shows
        a rank's log lines only to callers who may read pod logs)."""
        found: Manifest = self._call("GET", f"{self._path(namespace, name)}/failure")
        failure = found.get("lastFailure")
        return failure if isinstance(failure, dict) else None

    def pods(self, name: str, namespace: str | None = None) -> Manifests:
        """The job's pods as the dashboard lists them (rows, not pod objects)."""
        found: Manifest = self._call("GET", f"{self._path(namespace, name)}/pods")
        return list(found["items"])

    def logs(
        self, name: str, namespace: str | None = None, *, replica: str = "worker-0", follow: bool = False,
        tail: int | None = None, attempt: int | None = None,
    ) -> Iterator[str]:  # fmt: skip
        """The log of one replica's pod, as text as it comes."""
        pods.parse_replica(replica)
        params: dict[str, Any] = {"replica": replica, "follow": str(follow).lower()}
        params |= ({"tailLines": tail} if tail else {}) | ({"attempt": attempt} if attempt is not None else {})
        timeout = httpx.Timeout(self.timeout, read=None if follow else self.timeout)
        request = self.http.build_request("GET", f"{self._path(namespace, name)}/logs", params=params, timeout=timeout)
        with answering(self.server):
            response = self.http.send(request, stream=True)
        if response.status_code >= 400:
            try:
                raise problem(response)
            finally:
                response.close()
        return self._text(response)

    def _text(self, response: httpx.Response) -> Iterator[str]:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        try:
            with answering(self.server):
                for chunk in response.iter_raw():
                    yield decoder.decode(chunk)
            yield decoder.decode(b"", final=True)
        finally:
            response.close()

    def timeline(self, name: str, namespace: str | None = None, *, chrome: bool = False) -> Manifest:
        found: Manifest = self._call(
            "GET", f"{self._path(namespace, name)}/timeline", params={"format": "chrome" if chrome else "json"}
        )
        return found
