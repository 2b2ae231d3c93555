"""The operator's hot writes (a pod's create, delete and finalizer release; a job's status patch) sent straight on
the client's own connections. Their bodies are plain JSON we build ourselves, so the generated client's layer
(its argument checks and the walk of every body for models to convert) is CPU spent for nothing: per pod create it
is about 40% of the client's time (bench/bench_request_path.py).

What comes back is what the generated client gives with `_preload_content=False`: the urllib3 response, its body
read. A refusal raises the same ApiException, and a connection that fails raises the same urllib3 error, so the
callers and the one error mapping (kube/answers.py) cannot tell which way a write went. Credentials are the
client's own, read for every request as it reads them (a token refreshed by its hook is used at once); the client
sends only header credentials to an apiserver, and so does this."""

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import orjson
import urllib3
from kubernetes.client import ApiException
from kubernetes.client.rest import RESTResponse

from trainingjob.model import GROUP, VERSION

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
REQUEST_TIMEOUT = (5, 30)  # connect, read: a hung apiserver connection must not hold a reconcile for ever
TIMEOUT = urllib3.Timeout(connect=REQUEST_TIMEOUT[0], read=REQUEST_TIMEOUT[1])


def pod_path(namespace: str, name: str = "") -> str:
    pods = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods"
    return f"{pods}/{quote(name, safe='')}" if name else pods


def custom_path(plural: str, namespace: str, name: str, subresource: str = "") -> str:
    """An object of our own group's (a TrainingJob, a TrainingSweep), or its `subresource`."""
    parts = (GROUP, VERSION, "namespaces", namespace, plural, name, subresource)
    return "/apis/" + "/".join(quote(p, safe="") for p in parts if p)


class Direct:
    """Requests of the ApiClient `api`'s apiserver, on its connection pool, with its credentials."""

    def __init__(self, api: Any) -> None:
        self.api = api

    def _headers(self, content_type: str) -> dict[str, str]:
        headers = {**self.api.default_headers, "Accept": JSON, "Content-Type": content_type}
        for setting in self.api.configuration.auth_settings().values():
            if setting.get("in") == "header" and setting.get("value"):
                headers[setting["key"]] = setting["value"]
        return headers

    def send(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        content_type: str = JSON,
    ) -> Any:
        """`method` on `path` with `body` as JSON (JSON's types already: a model dumped with mode="json"); the
        response, its body read. A status outside 2xx raises ApiException as the generated client does; a TLS
        failure too (status 0)."""
        url = self.api.configuration.host + path
        data = None if body is None else orjson.dumps(body)
        try:
            response = self.api.rest_client.pool_manager.request(
                method, url, body=data, headers=self._headers(content_type), timeout=TIMEOUT
            )
        except urllib3.exceptions.SSLError as error:
            raise ApiException(status=0, reason=f"{type(error).__name__}\n{error}") from error
        if not 200 <= response.status <= 299:
            refused = RESTResponse(response)
            refused.read()
            raise ApiException.from_response(http_resp=refused, body=None, data=None)
        return response
