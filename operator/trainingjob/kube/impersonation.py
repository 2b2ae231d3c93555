"""Acting as a caller: Kubernetes impersonation (`Impersonate-*` headers) for a user that TokenReview named, sent
with every request of one client that shares the pool of the process' own. RBAC, admission policies and the audit
log then see the caller (`impersonatedUser`), not the process.

What is forwarded: the user, their uid, every group, and the ServiceAccount token's own extras (SA_EXTRAS: the
chart grants impersonating those keys and no others). Other extras are left out: the caller was already allowed
with all of them (a SubjectAccessReview), and Kubernetes then checks the impersonated request again, so leaving
one out can only refuse more, never allow more. Members of system:masters and system:nodes are never acted for:
the first passes every check, the second is a kubelet, not a person."""

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from kubernetes.client import ApiClient
from urllib3 import HTTPHeaderDict

from trainingjob.kube.reviews import Caller

SA_EXTRAS = tuple(
    f"authentication.kubernetes.io/{key}" for key in ("credential-id", "node-name", "node-uid", "pod-name", "pod-uid")
)
NEVER_ACTED_FOR = ("system:masters", "system:nodes")

Headers = tuple[tuple[str, str], ...]


class NotActedFor(Exception):  # noqa: N818  (an answer to a caller, not a bug)
    """A caller this process does not act for, and why."""


def impersonation_headers(caller: Caller) -> Headers:
    """The headers that make a request the caller's own; NotActedFor for a privileged group or a value a header
    cannot carry."""
    refused = [group for group in caller.groups if group in NEVER_ACTED_FOR]
    if refused:
        raise NotActedFor(f'user "{caller.username}" is in the group {refused[0]}: the API does not act for it')
    headers = [("Impersonate-User", caller.username)]
    headers += [("Impersonate-Uid", caller.uid)] if caller.uid else []
    headers += [("Impersonate-Group", group) for group in caller.groups]
    for key, values in caller.extra:
        if key in SA_EXTRAS:
            headers += [(f"Impersonate-Extra-{quote(key, safe='')}", value) for value in values]
    for name, value in headers:
        if not value or not value.isprintable() or not value.isascii() or value != value.strip():
            raise NotActedFor(
                f"the caller's {name.removeprefix('Impersonate-')} {value!r} cannot be sent to Kubernetes"
            )
    return tuple(headers)


class Impersonating(ApiClient):  # type: ignore[misc]  # the client is untyped
    """A Kubernetes ApiClient that adds `headers` to every request and is otherwise the client it copies: same
    configuration, same connection pool. Closing it leaves that pool open: it is the process' own."""

    def __init__(self, api: Any, headers: Headers) -> None:
        self.__dict__.update(api.__dict__)
        self._pool = None  # a thread pool for async_req is made per client: never shared
        self.impersonation = headers

    def call_api(
        self, method: str, url: str, header_params: dict[str, str] | None = None, body: Any = None,
        post_params: Sequence[Any] | None = None, _request_timeout: Any = None,
    ) -> Any:  # fmt: skip
        headers = HTTPHeaderDict(header_params or {})
        for name, value in self.impersonation:  # repeated, as Kubernetes reads more than one group
            headers.add(name, value)
        return super().call_api(method, url, headers, body, post_params, _request_timeout)

    def close(self) -> None:
        """The connection pool is shared: it stays open."""
