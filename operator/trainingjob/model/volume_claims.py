"""Volumes a driver provides: CSI inline volumes and ephemeral PersistentVolumeClaims, checked as Kubernetes checks a
pod's: a driver name, access modes and volume modes Kubernetes knows, a storage request above zero, template
metadata of labels and annotations only."""

from enum import StrEnum
from typing import Annotated

from pydantic import Field

from trainingjob.model.base import (
    DNS_SUBDOMAIN,
    ApiModel,
    Bool,
    LongStr,
    Quantity,
    RuledModel,
    ShortStr,
    Str,
    parse_quantity,
)
from trainingjob.model.pod import ResourceName
from trainingjob.model.podspec import LabelKey, LabelSelector, LabelValue, LocalObjectReference, ObjectName
from trainingjob.model.rules import Reason, Rule

# A CSI driver name: a DNS subdomain in any case, of at most 63 characters.
CSI_DRIVER = r"^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?)*$"
STORAGE = "storage"


class CsiSource(ApiModel):
    """A volume an installed CSI driver provides for the pod's lifetime, e.g. secrets-store.csi.k8s.io."""

    driver: Annotated[Str, Field(pattern=CSI_DRIVER, max_length=63)]
    """Name of the CSI driver."""
    read_only: Bool | None = None
    """Mount the volume read-only."""
    fs_type: ShortStr | None = None
    """Filesystem to mount, e.g. ext4; the driver's default when unset."""
    volume_attributes: Annotated[dict[ShortStr, LongStr] | None, Field(max_length=32)] = None
    """Driver-specific settings."""
    node_publish_secret_ref: LocalObjectReference | None = None
    """A Secret in the job's namespace the driver needs to mount the volume."""


class AccessMode(StrEnum):
    READ_WRITE_ONCE = "ReadWriteOnce"
    READ_ONLY_MANY = "ReadOnlyMany"
    READ_WRITE_MANY = "ReadWriteMany"
    READ_WRITE_ONCE_POD = "ReadWriteOncePod"


class VolumeMode(StrEnum):
    FILESYSTEM = "Filesystem"
    BLOCK = "Block"


class TypedReference(ApiModel):
    """An object to fill the claim from, e.g. a VolumeSnapshot."""

    api_group: ShortStr | None = None
    """API group of the object, e.g. snapshot.storage.k8s.io; the core group when unset."""
    kind: Annotated[Str, Field(min_length=1, max_length=253)]
    """Kind of the object, e.g. VolumeSnapshot or PersistentVolumeClaim."""
    name: Annotated[Str, Field(min_length=1, max_length=253)]
    """Name of the object."""
    namespace: ShortStr | None = None
    """dataSourceRef only: the object's namespace, where the cluster allows another."""


class ClaimResources(RuledModel):
    """What the claim asks for: requests.storage, above zero."""

    requests: Annotated[dict[ResourceName, Quantity], Field(max_length=8)]
    """At least storage, e.g. {storage: 100Gi}."""
    limits: Annotated[dict[ResourceName, Quantity] | None, Field(max_length=8)] = None
    """The most the claim may grow to, where the driver supports it."""

    cross_field_rules = (
        Rule(
            field="requests",
            cel=f"'{STORAGE}' in self.requests"
            f" && quantity(string(self.requests['{STORAGE}'])).isGreaterThan(quantity('0'))",
            message=f"requests.{STORAGE} must be set, above zero",
            reason=Reason.REQUIRED,
            holds=lambda r: STORAGE in r.requests and parse_quantity(r.requests[STORAGE]) > 0,
        ),
    )


class ClaimSpec(RuledModel):
    """The PersistentVolumeClaim each pod gets."""

    access_modes: Annotated[list[AccessMode], Field(min_length=1, max_length=4)]
    """How the volume may be mounted: ReadWriteOnce, ReadOnlyMany, ReadWriteMany or ReadWriteOncePod (alone)."""
    resources: ClaimResources
    """The size asked for."""
    storage_class_name: Annotated[Str, Field(pattern=f"^$|{DNS_SUBDOMAIN}", max_length=253)] | None = None
    """StorageClass of the volume; the cluster's default when unset, none when empty."""
    volume_mode: VolumeMode | None = None
    """Filesystem (the default) or Block."""
    selector: LabelSelector | None = None
    """Existing PersistentVolumes the claim may bind, by their labels."""
    data_source: TypedReference | None = None
    """A VolumeSnapshot or PersistentVolumeClaim to fill the volume from."""
    data_source_ref: TypedReference | None = None
    """An object to fill the volume from, of any kind a populator handles."""
    volume_name: ShortStr | None = None
    """An existing PersistentVolume to bind."""
    volume_attributes_class_name: ObjectName | None = None
    """VolumeAttributesClass of the volume."""

    cross_field_rules = (
        Rule(
            field="accessModes",
            cel="!('ReadWriteOncePod' in self.accessModes) || self.accessModes.size() == 1",
            message="ReadWriteOncePod cannot be combined with other access modes",
            reason=Reason.FORBIDDEN,
            holds=lambda s: AccessMode.READ_WRITE_ONCE_POD not in s.access_modes or len(s.access_modes) == 1,
        ),
    )


class ClaimMetadata(ApiModel):
    """Labels and annotations of the claim; Kubernetes names it after the pod and the volume."""

    labels: Annotated[dict[LabelKey, LabelValue] | None, Field(max_length=32)] = None
    """Labels of the claim."""
    annotations: Annotated[dict[LabelKey, LongStr] | None, Field(max_length=32)] = None
    """Annotations of the claim."""


class ClaimTemplate(ApiModel):
    """The PersistentVolumeClaim made for each pod, deleted with it."""

    metadata: ClaimMetadata | None = None
    """Labels and annotations of the claim."""
    spec: ClaimSpec
    """What the claim asks for."""


class EphemeralSource(ApiModel):
    """A volume from a PersistentVolumeClaim made for each pod and deleted with it, e.g. scratch space on a
    StorageClass."""

    volume_claim_template: ClaimTemplate
    """The claim."""
