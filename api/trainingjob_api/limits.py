"""How much one caller may ask of the API: a token bucket of requests per authenticated user, and a bound on the
SubjectAccessReviews one list across namespaces may ask, one per namespace."""

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from trainingjob_api.problems import ApiError


@dataclass(frozen=True)
class Bucket:
    """A caller's tokens at `at` (a monotonic time)."""

    tokens: float
    at: float


def take(bucket: Bucket, now: float, rate: float, burst: float) -> tuple[Bucket, float]:
    """The bucket after one request at `now`, and 0 if the request may pass, else the seconds until it may (the
    bucket then unchanged but refilled to `now`)."""
    tokens = min(burst, bucket.tokens + max(0.0, now - bucket.at) * rate)
    if tokens >= 1:
        return Bucket(tokens - 1, now), 0.0
    return Bucket(tokens, now), (1 - tokens) / rate


class CallerRates:
    """One token bucket per username: `rate` requests a second, `burst` at once; 429 with Retry-After beyond.
    At most `size` buckets are kept, the least recently used dropped (a dropped bucket starts full again)."""

    def __init__(
        self, rate: float, burst: int, size: int = 10_000, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._rate, self._burst, self._size, self._clock = rate, float(burst), size, clock
        self._buckets: OrderedDict[str, Bucket] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, username: str) -> None:
        now = self._clock()
        with self._lock:
            bucket, wait = take(self._buckets.pop(username, Bucket(self._burst, now)), now, self._rate, self._burst)
            self._buckets[username] = bucket
            while len(self._buckets) > self._size:
                self._buckets.popitem(last=False)
        if wait:
            message = f'user "{username}" sent more than {self._burst:g} requests at once or {self._rate:g} a second'
            retry = str(max(1, math.ceil(wait)))
            raise ApiError(429, "TooManyRequests", f"{message}; retry in {retry}s", headers={"Retry-After": retry})


def bound_checks(namespaces: list[str], most: int, what: str) -> list[str]:
    """`namespaces`, when one request may ask as many SubjectAccessReviews (one each) as there are; else 422
    naming the way round: one namespace at a time, or the right to `what` in every namespace."""
    if len(namespaces) <= most:
        return namespaces
    raise ApiError(
        422, "TooManyNamespaces",
        f"{len(namespaces)} namespaces would each be checked for the right to {what}, more than the {most} one "
        f"request may check (TJ_API_MAX_ACCESS_CHECKS): ask for one namespace, or for the right to {what} in "
        "every namespace",
    )  # fmt: skip
