"""The REST API's own request and response shapes; jobs themselves are the one TrainingJob model."""

import logging
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trainingjob.model import API_VERSION, TrainingJob
from trainingjob_sdk.jobs import JobEvent

log = logging.getLogger(__name__)


class ListMeta(BaseModel):
    """Where a list page stands."""

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    continue_: str | None = Field(default=None, alias="continue")
    """Pass as `continue` to get the next page; absent on the last page."""
    resource_version: str | None = Field(default=None, alias="resourceVersion")
    """The resourceVersion the API's cache has seen; the list reflects the cluster as of then (eventually
    consistent: a change made a moment ago may not be in it yet)."""


class TrainingJobList(BaseModel):
    """A page of TrainingJobs, sorted by namespace and name."""

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    api_version: str = Field(default=API_VERSION, alias="apiVersion")
    kind: str = "TrainingJobList"
    metadata: ListMeta
    items: list[TrainingJob]


class JobEventList(BaseModel):
    """The events of one job, oldest first."""

    items: list[JobEvent]


class Deleted(BaseModel):
    """A job (or sweep) whose deletion Kubernetes accepted; its pods (or trials' jobs) are garbage-collected after
    it."""

    namespace: str
    name: str
    status: str = "Deleting"


def public_manifest(raw: dict[str, Any]) -> dict[str, Any]:
    """A job as the API returns it: through the model (camelCase, unset fields left out), no managedFields."""
    try:
        manifest = TrainingJob.from_manifest(raw).to_manifest()
    except ValidationError as error:  # a stored object the model no longer accepts: show it as it is
        log.warning("%s/%s does not fit the model: %s", _meta(raw, "namespace"), _meta(raw, "name"), error)
        manifest = dict(raw)
    metadata = dict(manifest.get("metadata") or {})
    metadata.pop("managedFields", None)
    return {**manifest, "metadata": metadata, **_without_log_tail(manifest.get("status"))}


def _without_log_tail(status: Any) -> dict[str, Any]:
    """The failed rank's last log lines are shown only to callers who may read pod logs (GET .../failure)."""
    if not isinstance(status, dict) or not isinstance(status.get("lastFailure"), dict):
        return {}
    failure = {k: v for k, v in status["lastFailure"].items() if k != "logTail"}
    return {"status": {**status, "lastFailure": failure}}


def _meta(raw: dict[str, Any], key: str) -> str:
    return str((raw.get("metadata") or {}).get(key, ""))
