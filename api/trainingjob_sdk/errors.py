"""What can go wrong, as types a caller can catch: the same for both transports (Kubernetes and the REST API)."""

import ssl
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
from urllib3 import exceptions as urllib3_errors

from trainingjob.model import TrainingJob


@dataclass(frozen=True)
class FieldError:
    """One invalid field, by its path as people write it (spec.workers.replicas), and what is wrong with it."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


def field_path(location: tuple[int | str, ...] | list[int | str]) -> str:
    """pydantic's error location as the field path people write: spec.workers.env[0].name. The names pydantic gives
    its own validators (function-after[...], model-...) are left out; an empty location is the whole document."""
    path = ""
    for part in location:
        if isinstance(part, int):
            path += f"[{part}]"
        elif not str(part).startswith(("function-", "model-")):
            path += f".{part}" if path else str(part)
    return path or "(the document)"


def one_line(text: str) -> str:
    return " ".join(text.split())


class TrainingJobError(Exception):
    """Every error of the SDK. `status` is the HTTP status the server answered, None when none answered (the SDK
    found it itself); `reason` is the server's one-word reason (NotFound, AlreadyExists, JobFinished, ...).
    `created`: the jobs `create_all` created before this error stopped it."""

    default_reason = "Error"

    def __init__(self, message: str, *, status: int | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        self.message, self.status, self.reason = message, status, reason or self.default_reason
        self.created: list[TrainingJob] = []


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
    """The request (usually the manifest) is invalid; `fields` names each invalid field. `status` is None when the
    SDK found it before sending anything, the server's status (422, 400) when the server refused it."""

    default_reason = "Invalid"

    def __init__(
        self,
        message: str,
        fields: list[FieldError] | None = None,
        *,
        status: int | None = None,
        reason: str | None = None,
    ) -> None:
        super().__init__(message, status=status, reason=reason)
        self.fields = list(fields or [])

    def unsaid(self) -> list[FieldError]:
        """The fields whose message the error's message does not already say (the apiserver's does)."""
        said = one_line(self.message)
        return [f for f in self.fields if one_line(f.message) not in said]

    def __str__(self) -> str:
        return "; ".join([self.message, *map(str, self.unsaid())])


class Conflict(TrainingJobError):  # noqa: N818 (named as Kubernetes names them)
    """The job exists already (AlreadyExists), is finished (JobFinished), or changed while it was updated."""

    default_reason = "Conflict"


class Unavailable(TrainingJobError):  # noqa: N818 (named as Kubernetes names them)
    """The server could not serve the request: unreachable (status None), overloaded (429) or failing (5xx).
    Trying again later may work."""

    default_reason = "ServiceUnavailable"


class NotConfigured(TrainingJobError):  # noqa: N818 (named as Kubernetes names them)
    """No cluster to talk to, or not one the SDK can use as configured: no kubeconfig (or an unreadable one), not in
    a pod, a REST API URL that is no http(s) URL or that redirects elsewhere, an unreadable CA file, a REST API whose
    TLS certificate the client refuses (reason UntrustedCertificate)."""

    default_reason = "NotConfigured"


class WaitTimeout(TrainingJobError):  # noqa: N818 (named as Kubernetes names them)
    """The job did not reach what was waited for before the deadline; `job` is how it stood last (None if the
    deadline passed before it was read)."""

    default_reason = "Timeout"

    def __init__(self, message: str, job: TrainingJob | None = None) -> None:
        super().__init__(message)
        self.job = job


class JobFinished(TrainingJobError):  # noqa: N818 (named as Kubernetes names them)
    """The job waited for finished (Succeeded or Failed) without reaching what was waited for: it never will.
    `job` is the finished job."""

    default_reason = "Finished"

    def __init__(self, message: str, job: TrainingJob) -> None:
        super().__init__(message)
        self.job = job


class JobFailed(JobFinished):
    """The job waited for ended Failed; `job` is the failed job (its status says why)."""

    default_reason = "JobFailed"

    def __init__(self, job: TrainingJob) -> None:
        failure = job.status.last_failure if job.status else None
        why = f": {failure.pod} {failure.reason} {failure.message}".rstrip() if failure else ""
        super().__init__(f"trainingjob {job.metadata.name!r} failed{why}", job)


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


def refused_certificate(error: BaseException | None) -> ssl.SSLCertVerificationError | None:
    """The TLS client's refusal of the server's certificate among `error` and its causes, if that is what failed."""
    return next((cause for cause in _causes(error) if isinstance(cause, ssl.SSLCertVerificationError)), None)


def _os_reason(error: BaseException | None) -> str:
    """The operating system's words (e.g. "Connection refused") from the chain of causes, if it has them."""
    return next((cause.strerror for cause in _causes(error) if isinstance(cause, OSError) and cause.strerror), "")


def _causes(error: BaseException | None) -> Iterator[BaseException]:
    """`error` and what caused it, nearest first (at most eight: a chain may loop)."""
    for _ in range(8):
        if error is None:
            return
        yield error
        error = error.__cause__ or error.__context__
