"""Error responses: one JSON shape for every failure, Kubernetes errors mapped without leaking the server's own."""

import json
import logging
import ssl
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from kubernetes.client import ApiException
from pydantic import BaseModel, ValidationError
from urllib3 import exceptions as urllib3_errors

log = logging.getLogger(__name__)


class FieldError(BaseModel):
    """One invalid field, named by its path on the wire (camelCase), e.g. spec.workers.replicas."""

    field: str
    message: str


class Problem(BaseModel):
    """The body of every error response."""

    status: int
    reason: str
    message: str
    fields: list[FieldError] = []


class ApiError(Exception):
    """A failure to report to the caller as it is."""

    def __init__(self, status: int, reason: str, message: str, fields: list[FieldError] | None = None) -> None:
        super().__init__(message)
        self.problem = Problem(status=status, reason=reason, message=message, fields=fields or [])


def unauthorized(message: str) -> ApiError:
    return ApiError(401, "Unauthorized", message)


def not_found(what: str) -> ApiError:
    return ApiError(404, "NotFound", f"{what} not found")


def field_path(location: tuple[int | str, ...] | list[int | str]) -> str:
    """A pydantic location written like the apiserver writes field paths: spec.workers.env[0].name."""
    path = ""
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path.lstrip(".")


def invalid(error: ValidationError) -> ApiError:
    """A 422 naming every invalid field of a manifest."""
    fields = [FieldError(field=field_path(tuple(e["loc"])), message=e["msg"]) for e in error.errors()]
    listed = ", ".join(sorted({f.field or "(root)" for f in fields}))
    return ApiError(422, "Invalid", f"invalid fields: {listed}", fields)


def from_kubernetes(error: ApiException, what: str) -> ApiError:
    """The caller's view of a Kubernetes error: its own message for 4xx about the request, nothing else."""
    body = _body(error)
    message = str(body.get("message", ""))
    if error.status == 404:
        return not_found(what)
    if error.status == 409:
        return ApiError(409, str(body.get("reason") or "Conflict"), message or f"{what} conflicts")
    if error.status in (400, 422):
        causes = (body.get("details") or {}).get("causes") or []
        fields = [FieldError(field=str(c.get("field", "")), message=str(c.get("message", ""))) for c in causes]
        return ApiError(422, "Invalid", message or f"{what} is invalid", fields)
    # 401/403/5xx concern the API's own identity or Kubernetes itself: log them, tell the caller little.
    log.warning("Kubernetes answered %s for %s: %s", error.status, what, message)
    return ApiError(502, "BadGateway", f"Kubernetes could not serve the request for {what} (HTTP {error.status})")


def unreachable(error: Exception) -> ApiError:
    """A 503 for a request Kubernetes never answered: no connection, no answer in time, the connection lost."""
    log.warning("the Kubernetes API server is unreachable: %r", error)
    return ApiError(503, "ServiceUnavailable", f"the Kubernetes API server is unreachable: {_why(error)}")


def _why(error: Exception) -> str:
    if isinstance(error, urllib3_errors.MaxRetryError) and error.reason is not None:
        error = error.reason
    if isinstance(error, urllib3_errors.NewConnectionError | httpx.ConnectError):
        reason = _os_reason(error)
        return f"cannot connect ({reason})" if reason else "cannot connect"
    if isinstance(error, urllib3_errors.TimeoutError | httpx.TimeoutException):
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


def kubernetes_message(error: ApiException) -> str:
    """The apiserver's own message in an error, without the response's headers."""
    return str(_body(error).get("message", "")) or f"HTTP {error.status}"


def _body(error: ApiException) -> dict[str, Any]:
    try:
        parsed = json.loads(error.body or "{}")
    except (TypeError, ValueError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def problem_response(problem: Problem, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(problem.model_dump(), status_code=problem.status, headers=headers)


async def _on_api_error(_: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, ApiError)
    headers = {"WWW-Authenticate": "Bearer"} if error.problem.status == 401 else None
    return problem_response(error.problem, headers)


async def _on_request_invalid(_: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    fields = [FieldError(field=field_path(tuple(e["loc"])), message=e["msg"]) for e in error.errors()]
    listed = ", ".join(sorted({f.field for f in fields}))
    return problem_response(Problem(status=422, reason="Invalid", message=f"invalid request: {listed}", fields=fields))


async def _on_unexpected(_: Request, error: Exception) -> JSONResponse:
    log.exception("unexpected error", exc_info=error)
    return problem_response(Problem(status=500, reason="InternalError", message="internal error; see the API's log"))


async def _on_unreachable(_: Request, error: Exception) -> JSONResponse:
    return problem_response(unreachable(error).problem)


def install(app: FastAPI) -> None:
    app.add_exception_handler(ApiError, _on_api_error)
    app.add_exception_handler(urllib3_errors.HTTPError, _on_unreachable)
    app.add_exception_handler(httpx.TransportError, _on_unreachable)
    app.add_exception_handler(RequestValidationError, _on_request_invalid)
    app.add_exception_handler(Exception, _on_unexpected)
