"""The trainingjobs resource: create, read and list (from the cache), delete, suspend and resume."""

import base64
import binascii
import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Response

from trainingjob.model import GROUP, PLURAL, VERSION, TrainingJob
from trainingjob_api.body import MANIFEST_BODY, manifest
from trainingjob_api.deps import (
    AppState,
    AuthenticatedCaller,
    CanCreate,
    CanDelete,
    CanGet,
    CanList,
    CanPatch,
    Name,
    Namespace,
    State,
    acting_for,
    listable_namespaces,
    new_name,
)
from trainingjob_api.job_cache import CachedJob, Key
from trainingjob_api.problems import ApiError, Problem
from trainingjob_api.schemas import Deleted, TrainingJobList, public_manifest
from trainingjob_api.selectors import SelectorError, parse
from trainingjob_sdk.manifests import create_body

router = APIRouter(prefix="/api/v1", tags=["trainingjobs"])
JSON = "application/json"
ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": Problem} for code in (401, 403, 404, 409, 422, 502, 503)
}  # fmt: skip
Selector = Annotated[
    str | None,
    Query(alias="labelSelector", max_length=4096, description="Only jobs whose labels match, as `kubectl -l`."),
]
Limit = Annotated[int | None, Query(ge=1, description="The most jobs per page; every match when unset.")]
Continue = Annotated[
    str | None, Query(alias="continue", max_length=2048, description="The token from the previous page.")
]


def _job_response(job: dict[str, Any], status_code: int = 200) -> Response:
    return Response(json.dumps(public_manifest(job)), status_code=status_code, media_type=JSON)


def encode_continue(key: Key) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(key)).encode()).decode()


def decode_continue(token: str | None) -> Key | None:
    if not token:
        return None
    try:
        namespace, name = json.loads(base64.urlsafe_b64decode(token.encode()))
        return str(namespace), str(name)
    except (ValueError, TypeError, RecursionError, binascii.Error):
        raise ApiError(422, "Invalid", "continue: not a token this API returned") from None


def _page(
    state: AppState, namespaces: list[str], selector: str | None, limit: int | None, token: str | None
) -> Response:
    if limit is not None and limit > state.settings.max_page_size:
        raise ApiError(422, "Invalid", f"limit: at most {state.settings.max_page_size}")
    try:
        matches = state.cache.page(namespaces, parse(selector), decode_continue(token), limit)
    except SelectorError as error:
        raise ApiError(422, "Invalid", f"labelSelector: {error}") from None
    following = None
    if limit is not None and len(matches) > limit:
        matches = matches[:limit]
        following = encode_continue((matches[-1].namespace, matches[-1].name))
    return _list_response(matches, following, state.cache.resource_version)


def _list_response(jobs: list[CachedJob], following: str | None, resource_version: str) -> Response:
    """The list serialized from the cached JSON of each job, so a large page costs no model work."""
    metadata = json.dumps({"continue": following, "resourceVersion": resource_version})
    head = f'{{"apiVersion":"{GROUP}/{VERSION}","kind":"TrainingJobList","metadata":{metadata},"items":['
    return Response(head.encode() + b",".join(job.body for job in jobs) + b"]}", media_type=JSON)


@router.post(
    "/namespaces/{namespace}/trainingjobs",
    status_code=201,
    response_model=TrainingJob,
    responses={**ERRORS, 413: {"model": Problem}, 415: {"model": Problem}},
    openapi_extra=MANIFEST_BODY,
    summary="Create a job from its manifest (JSON or YAML), named by metadata.name or metadata.generateName",
)
def create_job(
    namespace: Namespace, caller: CanCreate, state: State, job: Annotated[TrainingJob, Depends(manifest)]
) -> Response:
    """Named by metadata.name, or by metadata.generateName: the response says the name Kubernetes gave it."""
    body = create_body(job, namespace)
    jobs = acting_for(state, caller, "create", PLURAL, namespace=namespace, name=new_name(body))
    return _job_response(jobs.create(body, namespace), 201)


@router.get(
    "/namespaces/{namespace}/trainingjobs",
    response_model=TrainingJobList,
    responses=ERRORS,
    summary="List the jobs of a namespace (from the cache)",
)
def list_jobs(
    namespace: Namespace, _: CanList, state: State, *, selector: Selector = None, limit: Limit = None,
    token: Continue = None,
) -> Response:  # fmt: skip
    return _page(state, [namespace], selector, limit, token)


@router.get(
    "/trainingjobs",
    response_model=TrainingJobList,
    responses=ERRORS,
    summary="List the jobs of every namespace the caller may list (from the cache)",
)
def list_all_jobs(
    caller: AuthenticatedCaller, state: State, *, selector: Selector = None, limit: Limit = None, token: Continue = None
) -> Response:
    return _page(state, listable_namespaces(state, caller, PLURAL), selector, limit, token)


@router.get(
    "/namespaces/{namespace}/trainingjobs/{name}",
    response_model=TrainingJob,
    responses=ERRORS,
    summary="Read a job (from the cache, else from Kubernetes)",
)
def get_job(namespace: Namespace, name: Name, _: CanGet, state: State) -> Response:
    cached = state.cache.get(namespace, name)
    if cached is not None:
        return Response(cached.body, media_type=JSON)
    return _job_response(state.jobs.get(name, namespace))  # not in the cache (yet): a job just created is found


@router.delete(
    "/namespaces/{namespace}/trainingjobs/{name}", response_model=Deleted, responses=ERRORS, summary="Delete a job"
)
def delete_job(namespace: Namespace, name: Name, caller: CanDelete, state: State) -> Deleted:
    acting_for(state, caller, "delete", PLURAL, namespace=namespace, name=name).delete(name, namespace)
    return Deleted(namespace=namespace, name=name)


@router.post(
    "/namespaces/{namespace}/trainingjobs/{name}/suspend",
    response_model=TrainingJob,
    responses=ERRORS,
    summary="Suspend a job: its pods checkpoint and stop, the job is kept",
)
def suspend_job(namespace: Namespace, name: Name, caller: CanPatch, state: State) -> Response:
    """409 JobFinished for a finished job; the patch is made on the version whose phase was read."""
    jobs = acting_for(state, caller, "suspend", PLURAL, namespace=namespace, name=name)
    return _job_response(jobs.set_suspend(name, True, namespace))


@router.post(
    "/namespaces/{namespace}/trainingjobs/{name}/resume",
    response_model=TrainingJob,
    responses=ERRORS,
    summary="Resume a suspended job from its newest checkpoint",
)
def resume_job(namespace: Namespace, name: Name, caller: CanPatch, state: State) -> Response:
    """409 JobFinished for a finished job; the patch is made on the version whose phase was read."""
    jobs = acting_for(state, caller, "resume", PLURAL, namespace=namespace, name=name)
    return _job_response(jobs.set_suspend(name, False, namespace))
