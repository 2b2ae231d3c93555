"""tjctl's cluster commands through the REST API, as a bearer-token caller."""

import ssl
from pathlib import Path
from typing import Any

import httpx

Manifest = dict[str, Any]


class RestError(Exception):
    """The REST API refused a request; the message is its own."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status


class Rest:
    """The same commands as tjctl.kube.Kube, against `server` (e.g. http://127.0.0.1:8000)."""

    def __init__(self, server: str, token: str, namespace: str | None, cacert: Path | None = None) -> None:
        self.namespace = namespace or "default"
        verify = ssl.create_default_context(cafile=str(cacert)) if cacert else True
        self.http = httpx.Client(
            base_url=f"{server.rstrip('/')}/api/v1", headers={"Authorization": f"Bearer {token}"}, verify=verify
        )

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.http.request(method, path, **kwargs)
        if response.status_code >= 400:
            try:
                message = response.json().get("message", response.text)
            except ValueError:
                message = response.text
            raise RestError(response.status_code, str(message))
        return (
            response.json()
            if response.headers.get("content-type", "").startswith("application/json")
            else response.text
        )

    def _job(self, name: str = "") -> str:
        return f"/namespaces/{self.namespace}/trainingjobs" + (f"/{name}" if name else "")

    def submit(self, manifest: Manifest) -> Manifest:
        created: Manifest = self._call("POST", self._job(), json=manifest)
        return created

    def list(self) -> list[Manifest]:
        found: Manifest = self._call("GET", self._job())
        return list(found["items"])

    def get(self, name: str) -> Manifest:
        found: Manifest = self._call("GET", self._job(name))
        return found

    def delete(self, name: str) -> None:
        self._call("DELETE", self._job(name))

    def set_suspend(self, name: str, suspend: bool) -> Manifest:
        found: Manifest = self._call("POST", f"{self._job(name)}/{'suspend' if suspend else 'resume'}")
        return found

    def logs(self, name: str, replica: str, tail: int | None) -> str:
        params: dict[str, Any] = {"replica": replica} | ({"tailLines": tail} if tail else {})
        return str(self._call("GET", f"{self._job(name)}/logs", params=params))

    def timeline(self, name: str, chrome: bool) -> Manifest:
        """The job's timeline as JSON, or as a Chrome trace."""
        found: Manifest = self._call(
            "GET", f"{self._job(name)}/timeline", params={"format": "chrome" if chrome else "json"}
        )
        return found
