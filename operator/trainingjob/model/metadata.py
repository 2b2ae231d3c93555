"""Kubernetes object metadata as the apiserver checks it: its own fields only (a snake_case or misspelt one is
unknown to it), label and annotation keys and label values of Kubernetes' syntax, annotations within their total
size, owner references of the shape it takes."""

from typing import Annotated, Any

from pydantic import AfterValidator, Field

from trainingjob.model.base import ApiModel, Bool, Int, Str
from trainingjob.model.podspec import LabelKey, LabelValue

ANNOTATIONS_MAX_BYTES = 256 * 1024  # the apiserver's limit on all annotations of an object together
OWNER_API_VERSION = r"^([^/]*/)?[^/]+$"  # a version after an optional group, as the apiserver parses it


def _annotations_fit(annotations: dict[str, str] | None) -> dict[str, str] | None:
    size = sum(len(key) + len(value) for key, value in (annotations or {}).items())
    if size > ANNOTATIONS_MAX_BYTES:
        raise ValueError(f"annotations take {size} bytes, more than the {ANNOTATIONS_MAX_BYTES} Kubernetes allows")
    return annotations


class OwnerReference(ApiModel):
    """An object this one belongs to, as the apiserver checks it: every field but the two flags set."""

    api_version: Annotated[Str, Field(pattern=OWNER_API_VERSION)]
    """API version of the owner, e.g. v1 or trainingjob.io/v1alpha1."""
    kind: Annotated[Str, Field(min_length=1)]
    """Kind of the owner."""
    name: Annotated[Str, Field(min_length=1)]
    """Name of the owner."""
    uid: Annotated[Str, Field(min_length=1)]
    """UID of the owner."""
    controller: Bool | None = None
    """Whether the owner is the object's controller."""
    block_owner_deletion: Bool | None = None
    """Whether deleting the owner in the foreground waits for this object (needs delete permission on the
    owner where the cluster enforces it)."""


def _one_controller(owners: list[OwnerReference] | None) -> list[OwnerReference] | None:
    if sum(1 for owner in owners or [] if owner.controller) > 1:
        raise ValueError("only one owner reference can have controller set to true")
    return owners


class ObjectMeta(ApiModel):
    """Standard object metadata: what people write (name, labels...) and what the apiserver adds (uid...)."""

    name: Str | None = None
    """Name of the object."""
    generate_name: Str | None = None
    """A prefix the apiserver completes into a unique name when name is unset."""
    namespace: Str | None = None
    """Namespace of the object."""
    labels: dict[LabelKey, LabelValue] | None = None
    """Labels of the object: keys like example.com/team, values of at most 63 letters, digits, '-', '_', '.'."""
    annotations: Annotated[dict[LabelKey, Str] | None, AfterValidator(_annotations_fit)] = None
    """Annotations of the object: keys like labels', any text as values."""
    finalizers: list[LabelKey] | None = None
    """What must happen before the object is deleted."""
    owner_references: Annotated[list[OwnerReference] | None, AfterValidator(_one_controller)] = None
    """Objects the object belongs to: it is deleted when they all are. At most one is its controller."""
    uid: Str | None = None
    """Set by the apiserver."""
    resource_version: Str | None = None
    """Set by the apiserver on every change."""
    generation: Int | None = None
    """Incremented by the apiserver on every spec change."""
    creation_timestamp: Str | None = None
    """Set by the apiserver."""
    deletion_timestamp: Str | None = None
    """Set by the apiserver when the object is being deleted."""
    deletion_grace_period_seconds: Int | None = None
    """Set by the apiserver when the object is being deleted."""
    self_link: Str | None = None
    """Deprecated; no longer set."""
    managed_fields: list[dict[str, Any]] | None = None
    """Which manager set which field, written by the apiserver."""
