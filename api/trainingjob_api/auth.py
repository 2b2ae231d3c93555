"""Who calls (TokenReview) and what they may do (SubjectAccessReview), asked of Kubernetes and cached briefly."""

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from kubernetes import client

from trainingjob_api.kube import Kube

K = TypeVar("K")
V = TypeVar("V")


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
    """One request to authorize: a verb on a resource, in a namespace ("" means every namespace)."""

    verb: str
    group: str
    resource: str
    namespace: str
    subresource: str = ""
    name: str = ""

    def describe(self) -> str:
        resource = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        where = f'in the namespace "{self.namespace}"' if self.namespace else "at the cluster scope"
        return f'cannot {self.verb} resource "{resource}" in API group "{self.group}" {where}'


class Authenticator:
    """Bearer token -> Caller through the TokenReview API."""

    def __init__(self, kube: Kube, cache: TtlCache[str, Caller | None], audience: str = "") -> None:
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

    def __init__(self, kube: Kube, cache: TtlCache[tuple[Caller, Access], bool]) -> None:
        self._kube, self._cache = kube, cache

    def allows(self, caller: Caller, access: Access) -> bool:
        return self._cache.get_or_compute((caller, access), lambda: self._review(caller, access))

    def _review(self, caller: Caller, access: Access) -> bool:
        attributes = client.V1ResourceAttributes(
            verb=access.verb,
            group=access.group,
            resource=access.resource,
            subresource=access.subresource or None,
            namespace=access.namespace or None,
            name=access.name or None,
        )
        spec = client.V1SubjectAccessReviewSpec(
            user=caller.username,
            uid=caller.uid or None,
            groups=list(caller.groups),
            extra={k: list(v) for k, v in caller.extra} or None,
            resource_attributes=attributes,
        )
        review = client.V1SubjectAccessReview(spec=spec)
        status = self._kube.authz.create_subject_access_review(review, _request_timeout=self._kube.timeout).status
        return bool(status and status.allowed)
