"""How the apiserver answered a call that failed, read in one place. Every Kubernetes call of the operator, the
REST API and the SDK turns the error it caught into an Answer here and decides from that: retry soon (transient),
"already done" (404 on delete, 409 on create), plan again (409 on a status write), or the SDK's typed errors."""

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import urllib3
from kubernetes.client import ApiException
from kubernetes.config import ConfigException


@dataclass(frozen=True)
class Answer:
    """`status` is the HTTP status, None when nothing answered (no connection, a timeout, credentials that could not
    be refreshed); `message` the apiserver's own words (its Status message) or what went wrong on the way;
    `reason` its one-word reason (NotFound, AlreadyExists, Conflict, Invalid, Expired...); `causes` the fields an
    Invalid names, as (field, message); `retry_after` the seconds a 429 asks to wait."""

    status: int | None
    message: str
    reason: str = ""
    causes: tuple[tuple[str, str], ...] = ()
    retry_after: float | None = None
    body: Mapping[str, Any] | None = None  # the whole Status object, when there was one

    @property
    def transient(self) -> bool:
        """Unreachable, overloaded or restarting: the same call may succeed soon."""
        return self.status is None or self.status == 429 or self.status >= 500

    @property
    def unconfigured(self) -> bool:
        return self.status is None and self.reason == "NotConfigured"


def from_status(status: int, body: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> Answer:
    """The Answer for a Kubernetes Status object `body` sent with HTTP `status` (an error response, or a watch's
    ERROR event)."""
    details = body.get("details") if isinstance(body.get("details"), Mapping) else {}
    causes = tuple(
        (str(cause.get("field", "")), str(cause.get("message", "")))
        for cause in (details or {}).get("causes") or []
        if isinstance(cause, Mapping)
    )
    return Answer(
        status=status,
        message=str(body.get("message") or f"HTTP {status}"),
        reason=str(body.get("reason") or ""),
        causes=causes,
        retry_after=_seconds((headers or {}).get("Retry-After")),
        body=body,
    )


# What a Kubernetes client call raises about the call itself: an answer, no answer, or credentials that failed.
CALL_ERRORS = (ApiException, ConfigException, urllib3.exceptions.HTTPError, OSError, TimeoutError)


def answer(error: BaseException) -> Answer | None:
    """What the apiserver answered, from the error a Kubernetes client call raised; None for an error that says
    nothing about the call (a bug, to be raised as it is)."""
    if isinstance(error, ApiException):
        if not error.status:  # raised by the client itself, not by an answer
            return Answer(None, str(error.reason or "no answer"), reason="Unreachable")
        return from_status(int(error.status), _status_body(error.body), error.headers)
    if isinstance(error, ConfigException):  # an exec plugin or token file that failed in the middle of a call
        return Answer(None, " ".join(str(error).split()), reason="NotConfigured")
    if isinstance(error, urllib3.exceptions.HTTPError | OSError | TimeoutError):
        return Answer(None, " ".join(str(error).split()) or type(error).__name__, reason="Unreachable")
    return None


def is_transient(error: BaseException) -> bool:
    """The apiserver is unreachable, overloaded or restarting: retry soon."""
    found = answer(error)
    return found is not None and found.transient and not found.unconfigured


def retry_after(error: BaseException) -> float | None:
    """The seconds a 429 asked to wait before the call is tried again; None when it did not ask."""
    found = answer(error)
    return None if found is None else found.retry_after


def status_of(error: BaseException) -> int | None:
    """The HTTP status of a Kubernetes client error; None when nothing answered or it is no such error."""
    found = answer(error)
    return None if found is None else found.status


def namespace_terminating(error: BaseException) -> bool:
    """Refused because the namespace is being deleted: nothing to do there any more."""
    found = answer(error)
    return found is not None and found.status == 403 and "being terminated" in found.message


def _status_body(raw: Any) -> Mapping[str, Any]:
    try:
        body = json.loads(raw or "{}")
    except (TypeError, ValueError):
        return {}
    return body if isinstance(body, Mapping) else {}


def _seconds(value: Any) -> float | None:
    try:
        return float(str(value)) if value is not None else None
    except ValueError:
        return None
