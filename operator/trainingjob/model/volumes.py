"""Volumes and volume mounts, every source typed and checked as Kubernetes checks a pod's (volume_files and
volume_claims hold the larger sources)."""

from enum import StrEnum
from typing import Annotated

from pydantic import Field

from trainingjob.model.base import DNS_LABEL, ApiModel, Bool, Quantity, RuledModel, Str
from trainingjob.model.rules import Reason, Rule
from trainingjob.model.volume_claims import CsiSource, EphemeralSource
from trainingjob.model.volume_files import (
    ABSOLUTE_PATH_WITHOUT_BACKSTEPS,
    RELATIVE_PATH,
    DownwardAPISource,
    FileMode,
    KeyPaths,
    ObjectName,
    ProjectedSource,
)

CHECKPOINT_VOLUME_NAME = "tj-checkpoint"  # the operator mounts spec.checkpoint.volume under this name
KEY_VOLUME_NAME = "tj-key"  # ... and the job's key Secret under this one
SHM_VOLUME_NAME = "tj-shm"  # ... and every pod's memory-backed /dev/shm under this one
SHM_PATH = "/dev/shm"
RESERVED_VOLUME_PREFIX = "tj-"
RESERVED_MOUNT_ROOT = "/var/run/trainingjob"  # where the operator mounts what it adds (the key)
AbsolutePath = Annotated[Str, Field(pattern=r"^/", max_length=1024)]


class PersistentVolumeClaimSource(ApiModel):
    """A PersistentVolumeClaim in the job's namespace."""

    claim_name: ObjectName
    """Name of the PersistentVolumeClaim."""
    read_only: Bool | None = None
    """Mount the claim read-only."""


class EmptyDirSource(ApiModel):
    """A directory that lives as long as the pod: it is lost when the pod is recreated."""

    medium: Annotated[Str, Field(pattern=r"^(|Memory)$")] | None = None
    """Empty for the node's disk, Memory for a tmpfs."""
    size_limit: Quantity | None = None
    """The most the directory may hold, e.g. 10Gi."""


class HostPathType(StrEnum):
    """What must be at a hostPath volume's path (Kubernetes' HostPathType); "" checks nothing."""

    UNCHECKED = ""
    DIRECTORY_OR_CREATE = "DirectoryOrCreate"
    DIRECTORY = "Directory"
    FILE_OR_CREATE = "FileOrCreate"
    FILE = "File"
    SOCKET = "Socket"
    CHAR_DEVICE = "CharDevice"
    BLOCK_DEVICE = "BlockDevice"


class HostPathSource(ApiModel):
    """A directory of the node the pod runs on; only useful on single-node or shared-filesystem clusters."""

    path: Annotated[Str, Field(pattern=ABSOLUTE_PATH_WITHOUT_BACKSTEPS, max_length=1024)]
    """Absolute path on the node, without a '..' element."""
    type: HostPathType | None = None
    """What must exist at the path: DirectoryOrCreate, Directory, FileOrCreate, File, Socket, CharDevice or
    BlockDevice; not checked when unset or empty."""


class ConfigMapSource(ApiModel):
    """The keys of a ConfigMap as files."""

    name: ObjectName
    """Name of the ConfigMap."""
    items: KeyPaths = None
    """The keys to project; every key when unset."""
    default_mode: FileMode | None = None
    """Mode bits of the files, e.g. 0644 (420 in decimal)."""
    optional: Bool | None = None
    """When true, a missing ConfigMap gives an empty volume instead of a pod that cannot start."""


class SecretSource(ApiModel):
    """The keys of a Secret as files."""

    secret_name: ObjectName
    """Name of the Secret."""
    items: KeyPaths = None
    """The keys to project; every key when unset."""
    default_mode: FileMode | None = None
    """Mode bits of the files, e.g. 0400 (256 in decimal)."""
    optional: Bool | None = None
    """When true, a missing Secret gives an empty volume instead of a pod that cannot start."""


class NfsSource(ApiModel):
    """An NFS export."""

    server: Annotated[Str, Field(min_length=1, max_length=253)]
    """Host name or IP address of the NFS server."""
    path: AbsolutePath
    """The exported path."""
    read_only: Bool | None = None
    """Mount the export read-only."""


_TYPED_SOURCES = ("persistentVolumeClaim", "emptyDir", "hostPath", "configMap", "secret", "nfs")
_SOURCES = (*_TYPED_SOURCES, "csi", "ephemeral", "projected", "downwardAPI")


class Volume(RuledModel):
    """A volume of the role's pods: a name and exactly one source."""

    name: Annotated[Str, Field(pattern=DNS_LABEL, max_length=63)]
    """Name of the volume, referenced by volumeMounts[].name. Names starting with tj- are reserved for the
    operator's volumes."""
    persistent_volume_claim: PersistentVolumeClaimSource | None = None
    """A PersistentVolumeClaim."""
    empty_dir: EmptyDirSource | None = None
    """A directory that lives as long as the pod."""
    host_path: HostPathSource | None = None
    """A directory of the node."""
    config_map: ConfigMapSource | None = None
    """The keys of a ConfigMap as files."""
    secret: SecretSource | None = None
    """The keys of a Secret as files."""
    nfs: NfsSource | None = None
    """An NFS export."""
    csi: CsiSource | None = None
    """A volume of an installed CSI driver, e.g. secrets-store.csi.k8s.io."""
    ephemeral: EphemeralSource | None = None
    """A PersistentVolumeClaim made for each pod and deleted with it."""
    projected: ProjectedSource | None = None
    """Several sources of files (Secrets, ConfigMaps, pod fields, service account tokens) in one directory."""
    downward_api: DownwardAPISource | None = Field(default=None, alias="downwardAPI")
    """Fields and resources of the pod as files."""

    cross_field_rules = (
        Rule(
            field="name",
            cel=f"!self.name.startsWith('{RESERVED_VOLUME_PREFIX}')",
            message=f"volume names starting with {RESERVED_VOLUME_PREFIX} are reserved for the operator's volumes "
            f"({CHECKPOINT_VOLUME_NAME}, {KEY_VOLUME_NAME}, {SHM_VOLUME_NAME})",
            reason=Reason.INVALID,
            holds=lambda v: not v.name.startswith(RESERVED_VOLUME_PREFIX),
        ),
        Rule(
            field="name",
            cel="[" + ", ".join(f"has(self.{s})" for s in _SOURCES) + "].filter(x, x).size() == 1",
            message="set exactly one volume source: " + ", ".join(_SOURCES),
            reason=Reason.INVALID,
            holds=lambda v: len(v.model_dump(exclude_none=True)) == 2,  # the name and one source
        ),
    )


def outside(path: str, root: str) -> bool:
    """Whether `path` is neither `root` nor below it."""
    return path != root and not path.startswith(root + "/")


def outside_cel(path: str, root: str) -> str:
    """outside() in CEL, for the path expression `path`."""
    return f"{path} != '{root}' && !{path}.startsWith('{root}/')"


def _mounted_outside(root: str, why: str) -> Rule:
    """The rule keeping a volume mount out of `root`, one of the operator's."""
    return Rule(
        field="mountPath",
        cel=outside_cel("self.mountPath", root),
        message=f"{root} {why}",
        reason=Reason.INVALID,
        holds=lambda m: outside(m.mount_path, root),
    )


class VolumeMount(RuledModel):
    """Where a volume of the role appears in a container of its pods."""

    name: Annotated[Str, Field(pattern=DNS_LABEL, max_length=63)]
    """Name of a volume in the role's volumes."""
    mount_path: AbsolutePath
    """Absolute path in the container."""
    sub_path: Annotated[Str, Field(pattern=RELATIVE_PATH, max_length=1024)] | None = None
    """Mount only this directory of the volume: a relative path without a '..' element."""
    read_only: Bool | None = None
    """Mount the volume read-only."""

    cross_field_rules = (
        _mounted_outside(RESERVED_MOUNT_ROOT, "is reserved for what the operator mounts (the job's key)"),
        _mounted_outside(SHM_PATH, "is the pod's shared memory, mounted by the operator (size it with shmSize)"),
    )
