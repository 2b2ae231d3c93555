"""Kubernetes object metadata as the apiserver checks it: its own fields only (a snake_case or misspelt one is
unknown to it), label and annotation keys and label values of Kubernetes' syntax, annotations within their total
size."""

from typing import Annotated, Any

from pydantic import AfterValidator

from trainingjob.model.base import ApiModel, Int, Str
from trainingjob.model.podspec import LabelKey, LabelValue

ANNOTATIONS_MAX_BYTES = 256 * 1024  # the apiserver's limit on all annotations of an object together


def _annotations_fit(annotations: dict[str, str] | None) -> dict[str, str] | None:
    size = sum(len(key) + len(value) for key, value in (annotations or {}).items())
    if size > ANNOTATIONS_MAX_BYTES:
        raise ValueError(f"annotations take {size} bytes, more than the {ANNOTATIONS_MAX_BYTES} Kubernetes allows")
    return annotations


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
    owner_references: list[dict[str, Any]] | None = None
    """Objects the object belongs to."""
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
