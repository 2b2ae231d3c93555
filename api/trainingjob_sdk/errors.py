"""What can go wrong, as types a caller can catch: the same for both transports (Kubernetes and the REST API)."""

import ssl
from dataclasses import dataclass

import httpx
from urllib3 import exceptions as urllib3_errors


@dataclass(frozen=True)
class FieldError:
    """One invalid field, by its path as people write it (spec.workers.replicas), and what is wrong with it."""

    field: str
    message: str


class TrainingJobError(Exception):
    """Every error of the SDK. `status` is the HTTP status the server answered, None when none answered;
    `reason` is the server's one-word reason (NotFound, AlreadyExists, JobFinished, ...)."""

    default_reason = "Error"

    def __init__(self, message: str, *, status: int | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.message, self.status, self.reason = message, status, reason or self.default_reason


class NotFound(TrainingJobError):  # noqa: N818 (named as Kubernetes names them)
    """The job (or its pod, or its namespace) does not exist."""

    default_reason = "NotFound"


class Unauthorized(TrainingJobError):  # noqa: N818 (named as Kubernetes names them)
    """The credentials were not accepted: an expired or wrong token, a kubeconfig for another cluster."""

    default_reason = "Unauthorized"


class Forbidden(TrainingJobError):  # noqa: N818 (named as Kubernetes names them)
    """The caller may not do this (RBAC)."""

    default_reason = "Forbidden"


class Invalid(TrainingJobError):  # noqa: N818 (named as Kubernetes names them)
    """The request (usually the manifest) is invalid; `fields` names each invalid field."""

    default_reason = "Invalid"

    def __init__(
        self,
        message: str,
        fields: list[FieldError] | None = None,
        *,
        status: int | None = 422,
        reason: str | None = None,
    ) -> None:
        super().__init__(message, status=status, reason=reason)
        self.fields = list(fields or [])

    def __str__(self) -> str:
        named = [f"{f.field}: {f.message}" for f in self.fields if f.field and f.field not in self.message]
        return "; ".join([self.message, *named])


class Conflict(TrainingJobError):  # noqa: N818 (named as Kubernetes names them)
    """The job exists already (AlreadyExists), is finished (JobFinished), or changed while it was updated."""

    default_reason = "Conflict"


class Unavailable(TrainingJobError):  # noqa: N818 (named as Kubernetes names them)
    """The server could not serve the request: unreachable (status None), overloaded (429) or failing (5xx).
    Trying again later may work."""

    default_reason = "ServiceUnavailable"


class NotConfigured(TrainingJobError):  # noqa: N818 (named as Kubernetes names them)
    """No cluster to talk to: no kubeconfig, not in a pod, no REST API URL."""

    default_reason = "NotConfigured"


class WaitTimeout(TrainingJobError):  # noqa: N818 (named as Kubernetes names them)
    """The job did not reach what was waited for in time; `job` is how it stood last."""

    default_reason = "Timeout"

    def __init__(self, message: str, job: object = None) -> None:
        super().__init__(message)
        self.job = job


def for_status(status: int, message: str, reason: str | None = None) -> TrainingJobError:
    """The typed error for an HTTP status a server answered with."""
    kinds: dict[int, type[TrainingJobError]] = {401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict}
    if status in (400, 422):
        return Invalid(message, status=status, reason=reason)
    if status in kinds:
        return kinds[status](message, status=status, reason=reason)
    if status == 429 or status >= 500:
        return Unavailable(message, status=status, reason=reason)
    return TrainingJobError(message, status=status, reason=reason)


def unreachable_reason(error: BaseException) -> str:
    """Why a server did not answer, in a few words: 'cannot connect (Connection refused)', 'it did not answer in
    time', 'the TLS handshake failed', 'the connection was lost'."""
    if isinstance(error, urllib3_errors.MaxRetryError) and error.reason is not None:
        error = error.reason
    if isinstance(error, urllib3_errors.NewConnectionError | httpx.ConnectError | ConnectionRefusedError):
        reason = _os_reason(error)
        return f"cannot connect ({reason})" if reason else "cannot connect"
    if isinstance(error, urllib3_errors.TimeoutError | httpx.TimeoutException | TimeoutError):
        return "it did not answer in time"
    if isinstance(error, urllib3_errors.SSLError | ssl.SSLError):
        return "the TLS handshake failed"
    return "the connection was lost"


def _os_reason(error: BaseException | None) -> str:
    """The operating system's words (e.g. "Connection refused") from the chain of causes, if it has them."""
    for _ in range(8):
        if error is None or (isinstance(error, OSError) and error.strerror):
            break
        error = error.__cause__ or error.__context__
    return error.strerror if isinstance(error, OSError) and error.strerror else ""
