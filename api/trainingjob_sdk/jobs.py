"""What both transports share about jobs: how errors name one, which phases are final, an event as a row."""

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from trainingjob.model import Phase
from trainingjob_sdk.errors import TrainingJobError

Manifest = dict[str, Any]
Manifests = list[Manifest]  # a name for annotations in classes that have a method called list
FINISHED = frozenset(phase.value for phase in Phase if phase.is_terminal)


def describe_job(namespace: str, name: str) -> str:
    """How errors name a job."""
    return f'trainingjob "{name}" in namespace "{namespace}"'


def json_object(text: str, what: str) -> Manifest:
    """`text` as the JSON object a server promised; TrainingJobError (BadResponse) saying `what` it is otherwise."""
    try:
        found = json.loads(text)
    except ValueError:
        found = None
    if not isinstance(found, dict):
        raise TrainingJobError(f"{what}: {text[:100]!r}", reason="BadResponse")
    return found


def event_row(event: Manifest) -> Manifest:
    """A Kubernetes event (core/v1 JSON) as the SDK and the REST API give it."""
    source = event.get("reportingComponent") or (event.get("source") or {}).get("component")
    return {
        "type": event.get("type"),
        "reason": event.get("reason"),
        "message": event.get("message"),
        "count": event.get("count"),
        "firstTimestamp": event.get("firstTimestamp") or event.get("eventTime"),
        "lastTimestamp": event.get("lastTimestamp") or event.get("eventTime"),
        "source": source or None,
    }


class JobEvent(BaseModel):
    """A Kubernetes event about a job."""

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    type: str | None = None
    """Normal or Warning."""
    reason: str | None = None
    message: str | None = None
    count: int | None = None
    first_timestamp: str | None = Field(default=None, alias="firstTimestamp")
    last_timestamp: str | None = Field(default=None, alias="lastTimestamp")
    source: str | None = None
    """The component that reported it, e.g. trainingjob-operator."""
