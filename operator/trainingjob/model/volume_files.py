"""Volumes made of files the kubelet writes (the keys of ConfigMaps and Secrets, fields of the pod, service account
tokens), checked as Kubernetes checks a pod's: relative file paths that neither climb out nor start with '..'
(the kubelet's own ..data), modes within 0777, exactly one source per file."""

from typing import Annotated

from pydantic import Field

from trainingjob.model.base import DNS_LABEL, DNS_SUBDOMAIN, ApiModel, Bool, Int, RuledModel, ShortStr, Str
from trainingjob.model.pod import ResourceFieldSelector
from trainingjob.model.podspec import LabelSelector
from trainingjob.model.rules import Reason, Rule

# A relative path without a '..' element, in a regex that pydantic and the apiserver (RE2: no lookaround) both read:
# elements that are not '..', between single slashes.
_ELEMENT = r"(?:[^/.][^/]*|\.[^/.][^/]*|\.\.[^/]+|\.)"
_FIRST_ELEMENT = r"(?:[^/.][^/]*|\.[^/.][^/]*|\.)"  # ... and not starting with '..' either
RELATIVE_PATH = rf"^{_ELEMENT}(?:/{_ELEMENT})*$"
FILE_PATH = rf"^{_FIRST_ELEMENT}(?:/{_ELEMENT})*$"
ABSOLUTE_PATH_WITHOUT_BACKSTEPS = rf"^(?:/{_ELEMENT}?)+$"
FilePath = Annotated[Str, Field(pattern=FILE_PATH, max_length=1024)]
FileMode = Annotated[Int, Field(ge=0, le=0o777)]
ObjectName = Annotated[Str, Field(pattern=DNS_SUBDOMAIN, max_length=253)]
# What a volume file can hold of the pod (Kubernetes' validVolumeDownwardAPIFieldPathExpressions, and one label or
# annotation).
VOLUME_FIELD_PATH = r"^(metadata\.(name|namespace|uid|labels|annotations)|metadata\.(labels|annotations)\['[^']+'\])$"


class KeyToPath(ApiModel):
    """Projects one key of a ConfigMap or Secret to a file."""

    key: ShortStr
    """The key to project."""
    path: FilePath
    """Relative path of the file in the volume: no leading '/', no '..' element, not starting with '..' (as a
    pod's volume requires)."""
    mode: FileMode | None = None
    """File mode bits, e.g. 0644 (420 in decimal)."""


KeyPaths = Annotated[list[KeyToPath] | None, Field(max_length=64)]


class VolumeFieldSelector(ApiModel):
    """A field of the pod, e.g. metadata.labels."""

    field_path: Annotated[Str, Field(pattern=VOLUME_FIELD_PATH, max_length=256)]
    """metadata.name, metadata.namespace, metadata.uid, metadata.labels, metadata.annotations, or one label or
    annotation: metadata.labels['KEY']."""
    api_version: Annotated[Str, Field(pattern=r"^v1$")] | None = None
    """Version of the schema the path is written in: v1 (the default)."""


class VolumeResourceSelector(ResourceFieldSelector):
    """A resource limit or request of one container of the pod, e.g. limits.memory of trainer."""

    container_name: Annotated[Str, Field(pattern=DNS_LABEL, max_length=63)]
    """The container: trainer, or the name of a sidecar or init container."""


class DownwardAPIFile(RuledModel):
    """A file holding a field or a resource of the pod: exactly one of fieldRef and resourceFieldRef."""

    path: FilePath
    """Relative path of the file in the volume."""
    field_ref: VolumeFieldSelector | None = None
    """A field of the pod."""
    resource_field_ref: VolumeResourceSelector | None = None
    """A resource limit or request of a container."""
    mode: FileMode | None = None
    """File mode bits, e.g. 0644 (420 in decimal)."""

    cross_field_rules = (
        Rule(
            field="fieldRef",
            cel="has(self.fieldRef) != has(self.resourceFieldRef)",
            message="set exactly one of fieldRef and resourceFieldRef",
            reason=Reason.INVALID,
            holds=lambda f: (f.field_ref is None) != (f.resource_field_ref is None),
        ),
    )


DownwardAPIFiles = Annotated[list[DownwardAPIFile] | None, Field(max_length=32)]


class DownwardAPISource(ApiModel):
    """Fields and resources of the pod as files."""

    items: DownwardAPIFiles = None
    """The files."""
    default_mode: FileMode | None = None
    """Mode bits of the files, e.g. 0644 (420 in decimal)."""


class ObjectProjection(ApiModel):
    """The keys of a ConfigMap or Secret in a projected volume."""

    name: ObjectName
    """Name of the ConfigMap or Secret."""
    items: KeyPaths = None
    """The keys to project; every key when unset."""
    optional: Bool | None = None
    """When true, a missing object projects nothing instead of a pod that cannot start."""


class DownwardAPIProjection(ApiModel):
    """Fields and resources of the pod in a projected volume."""

    items: DownwardAPIFiles = None
    """The files."""


class ServiceAccountTokenProjection(ApiModel):
    """A token of the pods' service account, e.g. for a secret store that trusts the cluster."""

    path: FilePath
    """Relative path of the token file."""
    audience: ShortStr | None = None
    """Who the token is for; the apiserver when unset."""
    expiration_seconds: Annotated[Int, Field(ge=600, le=1 << 32)] | None = None
    """How long the token lives, at least 600 seconds; the kubelet renews it."""


class ClusterTrustBundleProjection(ApiModel):
    """Certificates of ClusterTrustBundles, by name or by signer (where the cluster enables them)."""

    path: FilePath
    """Relative path of the certificate file."""
    name: ShortStr | None = None
    """One ClusterTrustBundle, by name."""
    signer_name: ShortStr | None = None
    """Every ClusterTrustBundle of this signer (that labelSelector selects)."""
    label_selector: LabelSelector | None = None
    """With signerName: the bundles to take."""
    optional: Bool | None = None
    """When true, a missing bundle writes nothing instead of a pod that cannot start."""


_PROJECTIONS = ("secret", "configMap", "downwardAPI", "serviceAccountToken", "clusterTrustBundle")


class VolumeProjection(RuledModel):
    """One source of a projected volume: at most one of its fields."""

    secret: ObjectProjection | None = None
    """Keys of a Secret."""
    config_map: ObjectProjection | None = None
    """Keys of a ConfigMap."""
    downward_api: DownwardAPIProjection | None = Field(default=None, alias="downwardAPI")
    """Fields and resources of the pod."""
    service_account_token: ServiceAccountTokenProjection | None = None
    """A token of the pods' service account."""
    cluster_trust_bundle: ClusterTrustBundleProjection | None = None
    """Certificates of ClusterTrustBundles."""

    cross_field_rules = (
        Rule(
            field="secret",
            cel="[" + ", ".join(f"has(self.{s})" for s in _PROJECTIONS) + "].filter(x, x).size() <= 1",
            message="set at most one source per item: " + ", ".join(_PROJECTIONS),
            reason=Reason.FORBIDDEN,
            holds=lambda p: len(p.model_dump(exclude_none=True)) <= 1,
        ),
    )


class ProjectedSource(ApiModel):
    """Several sources of files in one directory."""

    sources: Annotated[list[VolumeProjection] | None, Field(max_length=16)] = None
    """The sources."""
    default_mode: FileMode | None = None
    """Mode bits of the files, e.g. 0644 (420 in decimal)."""
