"""The trainingsweeps resource: create, read and list (from Kubernetes, with the API's identity once the caller's
rights are checked), delete, and the best trial so far."""

import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trainingjob.kube.reviews import Caller
from trainingjob.model import API_VERSION
from trainingjob.model.sweep import SWEEP_PLURAL, TrainingSweep
from trainingjob.model.sweep_status import BestTrial
from trainingjob_api.body import manifest_body, sweep_manifest
from trainingjob_api.deps import (
    AppState,
    AuthenticatedCaller,
    JobPermission,
    Name,
    Namespace,
    Permission,
    State,
    acting_for,
    listable_namespaces,
    new_name,
)
from trainingjob_api.problems import ApiError, Problem
from trainingjob_api.schemas import Deleted
from trainingjob_sdk.manifests import create_body
from trainingjob_sdk.sweeps import KubeSweeps, describe_sweep

router = APIRouter(prefix="/api/v1", tags=["trainingsweeps"])
JSON = "application/json"
ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": Problem} for code in (401, 403, 404, 409, 422, 502, 503)}
CanCreate = Annotated[Caller, Depends(Permission("create", resource=SWEEP_PLURAL))]
CanList = Annotated[Caller, Depends(Permission("list", resource=SWEEP_PLURAL))]
CanGet = Annotated[Caller, Depends(JobPermission("get", resource=SWEEP_PLURAL))]
CanDelete = Annotated[Caller, Depends(JobPermission("delete", resource=SWEEP_PLURAL))]


class TrainingSweepList(BaseModel):
    """The sweeps of a namespace, by name."""

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    api_version: str = Field(default=API_VERSION, alias="apiVersion")
    kind: str = "TrainingSweepList"
    items: list[TrainingSweep]


def _sweeps(state: AppState) -> KubeSweeps:
    return KubeSweeps(state.jobs)


def public(raw: dict[str, Any]) -> dict[str, Any]:
    """A sweep as the API returns it: through the model (camelCase, unset fields left out), no managedFields; as
    stored when the model no longer accepts it."""
    try:
        manifest = TrainingSweep.from_manifest(raw).to_manifest()
    except ValidationError:
        manifest = dict(raw)
    metadata = {k: v for k, v in (manifest.get("metadata") or {}).items() if k != "managedFields"}
    return {**manifest, "metadata": metadata}


def _list_response(sweeps: list[dict[str, Any]]) -> Response:
    body = {"apiVersion": API_VERSION, "kind": "TrainingSweepList", "items": [public(raw) for raw in sweeps]}
    return Response(json.dumps(body), media_type=JSON)


def _response(sweep: dict[str, Any], status_code: int = 200) -> Response:
    return Response(json.dumps(public(sweep)), status_code=status_code, media_type=JSON)


@router.post(
    f"/namespaces/{{namespace}}/{SWEEP_PLURAL}",
    status_code=201,
    response_model=TrainingSweep,
    responses={**ERRORS, 413: {"model": Problem}, 415: {"model": Problem}},
    openapi_extra=manifest_body("TrainingSweep"),
    summary="Create a sweep from its manifest (JSON or YAML), named by metadata.name",
)
def create_sweep(
    namespace: Namespace, caller: CanCreate, state: State, sweep: Annotated[TrainingSweep, Depends(sweep_manifest)]
) -> Response:
    """Checked by the model first: a parameter whose values the job would refuse is named (422)."""
    body = create_body(sweep, namespace)
    jobs = acting_for(state, caller, "create", SWEEP_PLURAL, namespace=namespace, name=new_name(body))
    return _response(KubeSweeps(jobs).create(body, namespace), 201)


@router.get(
    f"/namespaces/{{namespace}}/{SWEEP_PLURAL}",
    response_model=TrainingSweepList,
    responses=ERRORS,
    summary="List the sweeps of a namespace",
)
def list_sweeps(namespace: Namespace, _: CanList, state: State) -> Response:
    return _list_response(_sweeps(state).list(namespace))


@router.get(
    f"/{SWEEP_PLURAL}",
    response_model=TrainingSweepList,
    responses=ERRORS,
    summary="List the sweeps of every namespace the caller may list sweeps in (of those whose jobs the API serves)",
)
def list_all_sweeps(caller: AuthenticatedCaller, state: State) -> Response:
    """One list per namespace: the namespaces are those the API's job cache holds jobs in (a sweep's trials are
    jobs), each kept only if the caller may list sweeps there."""
    namespaces = listable_namespaces(state, caller, SWEEP_PLURAL)
    return _list_response([raw for ns in namespaces for raw in _sweeps(state).list(ns)])


@router.get(
    f"/namespaces/{{namespace}}/{SWEEP_PLURAL}/{{name}}",
    response_model=TrainingSweep,
    responses=ERRORS,
    summary="Read a sweep: every trial with its parameters, phase and objective, and the best",
)
def get_sweep(namespace: Namespace, name: Name, _: CanGet, state: State) -> Response:
    return _response(_sweeps(state).get(name, namespace))


@router.get(
    f"/namespaces/{{namespace}}/{SWEEP_PLURAL}/{{name}}/best",
    response_model=BestTrial,
    responses=ERRORS,
    summary="The sweep's best trial so far: its number, job, parameters and objective (404 NoBestTrial before one "
    "has succeeded)",
)
def best_trial(namespace: Namespace, name: Name, _: CanGet, state: State) -> BestTrial:
    found = (_sweeps(state).get(name, namespace).get("status") or {}).get("bestTrial")
    try:
        return BestTrial.model_validate(found)
    except ValidationError:
        message = f"no trial of {describe_sweep(namespace, name)} has succeeded yet"
        raise ApiError(404, "NoBestTrial", message) from None


@router.delete(
    f"/namespaces/{{namespace}}/{SWEEP_PLURAL}/{{name}}",
    response_model=Deleted,
    responses=ERRORS,
    summary="Delete a sweep (its trials' jobs go after it)",
)
def delete_sweep(namespace: Namespace, name: Name, caller: CanDelete, state: State) -> Deleted:
    jobs = acting_for(state, caller, "delete", SWEEP_PLURAL, namespace=namespace, name=name)
    KubeSweeps(jobs).delete(name, namespace)
    return Deleted(namespace=namespace, name=name)
