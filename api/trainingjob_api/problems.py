"""Error responses: one JSON shape for every failure; the SDK's typed errors about Kubernetes calls (made with the
API's own identity) mapped to what the caller may know, without leaking that identity."""

import logging
import re

import httpx
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from urllib3 import exceptions as urllib3_errors

from trainingjob.model.sweep import SWEEP_PLURAL
from trainingjob_sdk import errors as sdk
from trainingjob_sdk.jobs import describe_job
from trainingjob_sdk.sweeps import describe_sweep

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

    def __init__(
        self, status: int, reason: str, message: str, fields: list[FieldError] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:  # fmt: skip
        super().__init__(message)
        self.problem = Problem(status=status, reason=reason, message=message, fields=fields or [])
        self.headers = headers


# How the apiserver words an RBAC denial: it names the user refused, here the API's own identity.
RBAC_DENIAL = re.compile(r'is forbidden: User "')
THROTTLED_RETRY_SECONDS = "1"


def denies(message: str, caller: str) -> bool:
    """Whether an RBAC denial is of `caller` themself (a request the API made as them), not of the API."""
    return bool(caller) and f'User "{caller}" cannot ' in message and "cannot impersonate" not in message


def unauthorized(message: str) -> ApiError:
    return ApiError(401, "Unauthorized", message)


def from_sdk(error: sdk.TrainingJobError, what: str, caller: str = "") -> ApiError:
    """The caller's view of an SDK error about `what`: what concerns the request (not found, invalid, conflicting,
    refused by a quota or an admission policy, or by RBAC for the `caller` the API acted as) as it is; no answer as
    503, throttling as 503 with Retry-After; anything else (the API's own identity refused, Kubernetes failing)
    logged and told as 502 without the apiserver's words."""
    if isinstance(error, sdk.NotFound):
        return ApiError(404, error.reason, error.message)
    if isinstance(error, sdk.Invalid):
        fields = [FieldError(field=f.field, message=f.message) for f in error.fields]
        return ApiError(422, "Invalid", error.message, fields)
    if isinstance(error, sdk.Conflict):
        return ApiError(409, error.reason, error.message)
    if isinstance(error, sdk.Forbidden) and (not RBAC_DENIAL.search(error.message) or denies(error.message, caller)):
        return ApiError(403, "Forbidden", error.message)  # a quota, an admission policy, the caller's own RBAC
    if isinstance(error, sdk.Unavailable) and error.status in (None, 429):
        log.warning("%s (for %s)", error.message, what)
        message = error.message if error.status is None else "Kubernetes is throttling requests; try again"
        return ApiError(503, "ServiceUnavailable", message, headers={"Retry-After": THROTTLED_RETRY_SECONDS})
    log.warning("Kubernetes answered %s for %s: %s", error.status, what, error.message)
    return ApiError(502, "BadGateway", f"Kubernetes could not serve the request for {what} (HTTP {error.status})")


def unreachable(error: Exception) -> ApiError:
    """A 503 for a request Kubernetes never answered: no connection, no answer in time, the connection lost."""
    log.warning("the Kubernetes API server is unreachable: %r", error)
    why = sdk.unreachable_reason(error)
    return ApiError(503, "ServiceUnavailable", f"the Kubernetes API server is unreachable: {why}")


def problem_response(problem: Problem, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(problem.model_dump(), status_code=problem.status, headers=headers)


def _subject(request: Request) -> str:
    """What a request was about, as a 502 names it: the job of its path, else its namespace, else the path."""
    namespace, name = request.path_params.get("namespace"), request.path_params.get("name")
    if namespace and name:
        describe = describe_sweep if f"/{SWEEP_PLURAL}/" in request.url.path else describe_job
        return describe(str(namespace), str(name))
    return f'trainingjobs in namespace "{namespace}"' if namespace else request.url.path


async def _on_api_error(_: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, ApiError)
    headers = {"WWW-Authenticate": "Bearer"} if error.problem.status == 401 else error.headers
    return problem_response(error.problem, headers)


async def _on_sdk_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, sdk.TrainingJobError)
    mapped = from_sdk(error, _subject(request), getattr(request.state, "caller", ""))
    return problem_response(mapped.problem, mapped.headers)


async def _on_request_invalid(_: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    fields = [FieldError(field=sdk.field_path(tuple(e["loc"])), message=e["msg"]) for e in error.errors()]
    listed = ", ".join(sorted({f.field for f in fields}))
    return problem_response(Problem(status=422, reason="Invalid", message=f"invalid request: {listed}", fields=fields))


async def _on_unexpected(_: Request, error: Exception) -> JSONResponse:
    log.exception("unexpected error", exc_info=error)
    return problem_response(Problem(status=500, reason="InternalError", message="internal error; see the API's log"))


async def _on_unreachable(_: Request, error: Exception) -> JSONResponse:
    return problem_response(unreachable(error).problem)


def install(app: FastAPI) -> None:
    app.add_exception_handler(ApiError, _on_api_error)
    app.add_exception_handler(sdk.TrainingJobError, _on_sdk_error)
    app.add_exception_handler(urllib3_errors.HTTPError, _on_unreachable)
    app.add_exception_handler(httpx.TransportError, _on_unreachable)
    app.add_exception_handler(RequestValidationError, _on_request_invalid)
    app.add_exception_handler(Exception, _on_unexpected)
