"""The TrainingJob resource: its identity in the Kubernetes API, metadata, spec and status."""

import re
from typing import Any, Self

from pydantic import Field, field_validator

from trainingjob.model.base import RuledModel, Str
from trainingjob.model.metadata import ObjectMeta
from trainingjob.model.rules import Reason, Rule
from trainingjob.model.spec import TrainingJobSpec
from trainingjob.model.status import TrainingJobStatus

GROUP = "trainingjob.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "TrainingJob"
PLURAL = "trainingjobs"
SINGULAR = "trainingjob"
SHORT_NAMES = ("tj",)
CATEGORIES = ("training",)
MAX_NAME_LENGTH = 40  # leaves room for "-worker-<index>-<attempt>" in pod names of at most 63
NAME_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"  # a DNS-1035 label: the job's headless Service has its name
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def json_numbers(document: Any) -> Any:
    """`document` with every whole float (2.0, 1e3) an integer, as the cluster reads it: JSON has one kind of
    number, kubectl sends 1e3 as 1000, and the apiserver takes a whole number where an integer is due."""
    if isinstance(document, dict):
        return {key: json_numbers(value) for key, value in document.items()}
    if isinstance(document, list):
        return [json_numbers(item) for item in document]
    if isinstance(document, float) and document.is_integer() and INT64_MIN <= document <= INT64_MAX:
        return int(document)
    return document


def name_rule(max_length: int) -> Rule:
    """metadata.name is a DNS label of at most `max_length` characters (room for what is named after it)."""

    def holds(resource: "ApiObject") -> bool:
        name = resource.metadata.name
        return name is None or (len(name) <= max_length and re.fullmatch(NAME_PATTERN, name) is not None)

    return Rule(
        field="metadata.name",
        cel=f"self.metadata.name.size() <= {max_length} && self.metadata.name.matches('{NAME_PATTERN}')",
        message="metadata.name must be a lowercase DNS label (a-z, 0-9, '-', starting with a letter)"
        f" of at most {max_length} characters",
        reason=Reason.INVALID,
        holds=holds,
    )


class ApiObject(RuledModel):
    """A resource of the project's API: its apiVersion and kind checked, read from and written as a manifest."""

    api_version: Str = API_VERSION
    """trainingjob.io/v1alpha1"""
    kind: Str
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    """Standard object metadata."""

    @field_validator("api_version")
    @classmethod
    def _is_our_api_version(cls, value: str) -> str:
        if value != API_VERSION:
            raise ValueError(f"apiVersion must be {API_VERSION}")
        return value

    @field_validator("kind")
    @classmethod
    def _is_our_kind(cls, value: str) -> str:
        kind = cls.model_fields["kind"].default
        if value != kind:
            raise ValueError(f"kind must be {kind}")
        return value

    @classmethod
    def from_manifest(cls, manifest: Any) -> Self:
        """The resource as people and the apiserver write it: camelCase only. The Python (snake_case) names are for
        code; from a manifest they are unknown fields, as the apiserver's strict field validation says. A whole
        float is the integer (json_numbers)."""
        return cls.model_validate(json_numbers(manifest), by_alias=True, by_name=False)

    def to_manifest(self) -> dict[str, Any]:
        """The resource as the Kubernetes API takes it: camelCase keys, unset fields left out."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class TrainingJob(ApiObject):
    """A distributed PyTorch training job: DDP or parameter-server, restarted from its checkpoints."""

    kind: Str = KIND
    """TrainingJob"""
    spec: TrainingJobSpec
    """The desired state of the job."""
    status: TrainingJobStatus | None = None
    """The observed state of the job, written by the operator."""

    cross_field_rules = (name_rule(MAX_NAME_LENGTH),)
