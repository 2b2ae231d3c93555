"""FastAPI dependencies: the app's state, the caller (TokenReview) and their permission (SubjectAccessReview)."""

import logging
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from trainingjob.kube.impersonation import Headers, NotActedFor, impersonation_headers
from trainingjob.kube.reviews import Access, Authenticator, Authorizer, Caller, TtlCache
from trainingjob.model import GROUP, PLURAL
from trainingjob_api.job_cache import JobCache
from trainingjob_api.kube import Kube
from trainingjob_api.limits import CallerRates, bound_checks
from trainingjob_api.logs import PodLogs, StreamSlots
from trainingjob_api.metrics import ApiMetrics
from trainingjob_api.problems import ApiError, unauthorized
from trainingjob_api.settings import ApiSettings
from trainingjob_api.streams import StreamGuard
from trainingjob_sdk.kube import KubeJobs

log = logging.getLogger(__name__)

NAMESPACE_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
NAME_PATTERN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"


@dataclass(frozen=True)
class AppState:
    """Everything a request handler needs, built once by create_app."""

    settings: ApiSettings
    kube: Kube
    jobs: KubeJobs  # every Kubernetes call about jobs, their pods and events, with the API's own identity
    cache: JobCache
    authenticator: Authenticator
    authorizer: Authorizer
    metrics: ApiMetrics
    pod_logs: PodLogs
    stream_slots: StreamSlots
    rates: CallerRates  # requests per caller
    readiness: TtlCache[str, str]  # the last answer of the apiserver's /readyz, "" when ready, kept a second


def get_state(request: Request) -> AppState:
    state: AppState = request.app.state.trainingjob
    return state


State = Annotated[AppState, Depends(get_state)]
Namespace = Annotated[str, Path(pattern=NAMESPACE_PATTERN, max_length=63, description="The job's namespace.")]
Name = Annotated[str, Path(pattern=NAME_PATTERN, max_length=253, description="The job's name.")]
_bearer = HTTPBearer(auto_error=False, description="A Kubernetes bearer token, checked with TokenReview.")


def authenticated(
    request: Request, state: State, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> Caller:
    if credentials is None or not credentials.credentials:
        raise unauthorized("an Authorization: Bearer <Kubernetes token> header is required")
    caller = state.authenticator.authenticate(credentials.credentials)
    if caller is None:
        audience = state.settings.token_audience
        hint = f" for the audience {audience} (kubectl create token NAME --audience {audience})" if audience else ""
        raise unauthorized(f"the bearer token was not accepted by Kubernetes (TokenReview){hint}")
    state.rates.take(caller.username)
    request.state.caller = caller.username  # an RBAC denial of the caller, as the API acted for them, is theirs
    return caller


AuthenticatedCaller = Annotated[Caller, Depends(authenticated)]


def bearer(credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> str:
    return credentials.credentials if credentials else ""


Token = Annotated[str, Depends(bearer)]


def stream_guard(state: AppState, token: str, caller: Caller, *accesses: Access) -> StreamGuard:
    """The re-check of a stream opened by `caller` with `token`, allowed `accesses` (TJ_API_STREAM_RECHECK_SECONDS)."""
    period = state.settings.stream_recheck_seconds
    return StreamGuard(state.authenticator, state.authorizer, token, caller, accesses, period)


def listable_namespaces(state: AppState, caller: Caller, plural: str) -> list[str]:
    """The namespaces with jobs in which the caller may list `plural`: every one on a right in every namespace (one
    review), else one review per namespace, at most TJ_API_MAX_ACCESS_CHECKS of them (limits.bound_checks)."""
    namespaces = state.cache.namespaces()
    if state.authorizer.allows(caller, Access("list", GROUP, plural, "")):
        return namespaces
    checked = bound_checks(namespaces, state.settings.max_access_checks, f"list {plural}")
    return [ns for ns in checked if state.authorizer.allows(caller, Access("list", GROUP, plural, ns))]


def acting_for(state: AppState, caller: Caller, verb: str, plural: str, *, namespace: str, name: str) -> KubeJobs:
    """The API's jobs client acting as `caller` (Kubernetes impersonation): RBAC, admission policies and the audit
    log see the caller. Logged with who asked, the verb and the object; 403 for a caller the API never acts for."""
    headers = acting_headers(caller)
    log.info("acting for user %r: %s %s %s/%s", caller.username, verb, plural, namespace, name)
    return state.jobs.acting_as(headers)


def acting_headers(caller: Caller) -> Headers:
    """The headers that make a request to Kubernetes the caller's own; 403 for a caller the API never acts for."""
    try:
        return impersonation_headers(caller)
    except NotActedFor as refusal:
        raise ApiError(403, "Forbidden", str(refusal)) from None


def new_name(body: dict[str, Any]) -> str:
    """The name an object to create will have, as far as is known: `prefix*` for metadata.generateName."""
    metadata = body["metadata"]
    return str(metadata.get("name") or f"{metadata.get('generateName', '')}*")


def require(state: AppState, caller: Caller, access: Access) -> None:
    """Raise 403 unless Kubernetes allows `caller` this `access`."""
    if not state.authorizer.allows(caller, access):
        raise ApiError(403, "Forbidden", f'user "{caller.username}" {access.describe()}')


class Permission:
    """A dependency allowing the request only if the caller may `verb` the resource in the path's namespace."""

    def __init__(self, verb: str, resource: str = PLURAL, group: str = GROUP, subresource: str = "") -> None:
        self.verb, self.resource, self.group, self.subresource = verb, resource, group, subresource

    def __call__(self, namespace: Namespace, caller: AuthenticatedCaller, state: State) -> Caller:
        return self.check(state, caller, namespace)

    def check(self, state: AppState, caller: Caller, namespace: str, name: str = "") -> Caller:
        require(state, caller, Access(self.verb, self.group, self.resource, namespace, self.subresource, name))
        if not state.cache.serves(namespace):
            raise ApiError(404, "NotFound", f'namespace "{namespace}" is not served by this API (TJ_API_NAMESPACES)')
        return caller


class JobPermission(Permission):
    """Permission to `verb` the job the path names, asked with its name: RBAC rules with resourceNames hold, and
    the dashboard's buttons (enabled by the same question, GET .../access) agree with the endpoints."""

    def __call__(  # type: ignore[override]
        self, namespace: Namespace, name: Name, caller: AuthenticatedCaller, state: State
    ) -> Caller:
        return self.check(state, caller, namespace, name)


CanCreate = Annotated[Caller, Depends(Permission("create"))]
CanGet = Annotated[Caller, Depends(JobPermission("get"))]
CanList = Annotated[Caller, Depends(Permission("list"))]
CanDelete = Annotated[Caller, Depends(JobPermission("delete"))]
CanPatch = Annotated[Caller, Depends(JobPermission("patch"))]
CanWatch = Annotated[Caller, Depends(JobPermission("watch"))]
CanListEvents = Annotated[Caller, Depends(Permission("list", resource="events", group=""))]
CanListPods = Annotated[Caller, Depends(Permission("list", resource="pods", group=""))]
CanGetLogs = Annotated[Caller, Depends(Permission("get", resource="pods", group="", subresource="log"))]
