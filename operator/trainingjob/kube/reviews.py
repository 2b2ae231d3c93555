"""Who calls (TokenReview) and what they may do (SubjectAccessReview), asked of Kubernetes and cached briefly: the
one way the REST API checks its callers and the operator checks who reads its /metrics."""

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from kubernetes import client
from urllib3.exceptions import HTTPError

K = TypeVar("K")
V = TypeVar("V")


class Reviewers(Protocol):
    """The Kubernetes clients that answer the reviews: authentication.k8s.io and authorization.k8s.io."""

    @property
    def authn(self) -> Any: ...  # kubernetes.client.AuthenticationV1Api

    @property
    def authz(self) -> Any: ...  # kubernetes.client.AuthorizationV1Api

    @property
    def timeout(self) -> float: ...


@dataclass(frozen=True)
class ReviewClients:
    """Reviewers made from one ApiClient (the operator's connection)."""

    authn: Any
    authz: Any
    timeout: float

    @classmethod
    def of(cls, api: Any, timeout: float) -> "ReviewClients":
        return cls(client.AuthenticationV1Api(api), client.AuthorizationV1Api(api), timeout)


class TtlCache(Generic[K, V]):
    """A small thread-safe map whose entries expire after `ttl` seconds, oldest dropped beyond `size`."""

    def __init__(self, ttl: float, size: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl, self._size, self._clock = ttl, size, clock
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self._lock = threading.Lock()

    def get_or_compute(self, key: K, compute: Callable[[], V]) -> V:
        now = self._clock()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] > now:
                return entry[1]
        value = compute()
        if self._ttl > 0:
            with self._lock:
                self._entries[key] = (now + self._ttl, value)
                self._entries.move_to_end(key)
                while len(self._entries) > self._size:
                    self._entries.popitem(last=False)
        return value


@dataclass(frozen=True)
class Caller:
    """An authenticated user as Kubernetes knows it."""

    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class Access:
    """One request to authorize: a verb on a resource, in a namespace ("" means every namespace); or, with a
    `path`, a verb on a URL that names no resource (`get /metrics`, as RBAC's nonResourceURLs grant it)."""

    verb: str
    group: str = ""
    resource: str = ""
    namespace: str = ""
    subresource: str = ""
    name: str = ""
    path: str = ""

    @classmethod
    def url(cls, verb: str, path: str) -> "Access":
        return cls(verb, path=path)

    def describe(self) -> str:
        if self.path:
            return f'cannot {self.verb} path "{self.path}"'
        resource = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        where = f'in the namespace "{self.namespace}"' if self.namespace else "at the cluster scope"
        return f'cannot {self.verb} resource "{resource}" in API group "{self.group}" {where}'


class Authenticator:
    """Bearer token -> Caller through the TokenReview API."""

    def __init__(self, kube: Reviewers, cache: TtlCache[str, Caller | None], audience: str = "") -> None:
        self._kube, self._cache, self._audience = kube, cache, audience

    def authenticate(self, token: str) -> Caller | None:
        key = hashlib.sha256(token.encode()).hexdigest()  # never keep the token itself
        return self._cache.get_or_compute(key, lambda: self._review(token))

    def _review(self, token: str) -> Caller | None:
        audiences = [self._audience] if self._audience else None
        review = client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token, audiences=audiences))
        status = self._kube.authn.create_token_review(review, _request_timeout=self._kube.timeout).status
        if not status or not status.authenticated or not status.user:
            return None
        if self._audience and self._audience not in (status.audiences or []):
            return None  # an authenticator that ignores audiences said yes: not a token for us
        user = status.user
        extra = tuple(sorted((k, tuple(v)) for k, v in (user.extra or {}).items()))
        return Caller(user.username or "", user.uid or "", tuple(user.groups or ()), extra)


class Authorizer:
    """(Caller, Access) -> allowed? through the SubjectAccessReview API."""

    def __init__(self, kube: Reviewers, cache: TtlCache[tuple[Caller, Access], bool]) -> None:
        self._kube, self._cache = kube, cache

    def allows(self, caller: Caller, access: Access) -> bool:
        return self._cache.get_or_compute((caller, access), lambda: self._review(caller, access))

    def _review(self, caller: Caller, access: Access) -> bool:
        spec = client.V1SubjectAccessReviewSpec(
            user=caller.username,
            uid=caller.uid or None,
            groups=list(caller.groups),
            extra={k: list(v) for k, v in caller.extra} or None,
        )
        if access.path:
            spec.non_resource_attributes = client.V1NonResourceAttributes(verb=access.verb, path=access.path)
        else:
            spec.resource_attributes = client.V1ResourceAttributes(
                verb=access.verb,
                group=access.group,
                resource=access.resource,
                subresource=access.subresource or None,
                namespace=access.namespace or None,
                name=access.name or None,
            )
        review = client.V1SubjectAccessReview(spec=spec)
        status = self._kube.authz.create_subject_access_review(review, _request_timeout=self._kube.timeout).status
        return bool(status and status.allowed)


METRICS = Access.url("get", "/metrics")


@dataclass(frozen=True)
class Refusal:
    """Why a request is refused: 401 (no token, or one Kubernetes does not accept), 403 (not allowed) or 503 (the
    reviews could not be asked)."""

    status: int
    message: str


def bearer_token(authorization: str | None) -> str:
    """The token of an `Authorization: Bearer <token>` header; "" for any other header, or none."""
    scheme, _, token = (authorization or "").strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


class Gate:
    """Lets a request through when its bearer token is accepted (TokenReview) and its caller may `access`
    (SubjectAccessReview); both answers are cached as the Authenticator and Authorizer cache them."""

    def __init__(self, authenticator: Authenticator, authorizer: Authorizer) -> None:
        self._authenticator, self._authorizer = authenticator, authorizer

    @classmethod
    def of(cls, reviewers: Reviewers, audience: str = "", ttl: float = 10.0, size: int = 1000) -> "Gate":
        return cls(Authenticator(reviewers, TtlCache(ttl, size), audience), Authorizer(reviewers, TtlCache(ttl, size)))

    def refusal(self, authorization: str | None, access: Access) -> Refusal | None:
        """None when the request may pass; blocking (it asks Kubernetes), so run it off an event loop."""
        token = bearer_token(authorization)
        if not token:
            return Refusal(401, "an Authorization: Bearer <Kubernetes token> header is required")
        try:
            caller = self._authenticator.authenticate(token)
            if caller is None:
                return Refusal(401, "the bearer token was not accepted by Kubernetes (TokenReview)")
            if not self._authorizer.allows(caller, access):
                return Refusal(403, f'user "{caller.username}" {access.describe()}')
        except (client.ApiException, HTTPError) as error:
            return Refusal(503, f"Kubernetes did not answer the token's review: {type(error).__name__}")
        return None
