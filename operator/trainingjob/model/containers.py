"""The containers of a role's pods besides the trainer (init containers and native sidecars), and what every
container may take its environment from."""

from typing import Annotated

from pydantic import AfterValidator, Field

from trainingjob.children.naming import CONTAINER_NAME
from trainingjob.model.base import DNS_LABEL, DNS_SUBDOMAIN, ApiModel, Bool, RuledModel, Str, list_map, unique_by
from trainingjob.model.pod import ENV_NAME, EnvVar, PullPolicy, Resources
from trainingjob.model.rules import Reason, Rule
from trainingjob.model.security import ContainerSecurity
from trainingjob.model.volumes import VolumeMount

Image = Annotated[Str, Field(pattern=r"^[^\s]+$", max_length=512)]
Argument = Annotated[Str, Field(max_length=4096)]
ObjectName = Annotated[Str, Field(pattern=DNS_SUBDOMAIN, max_length=253)]
WorkingDir = Annotated[Str, Field(pattern=r"^/", max_length=1024)]
OWNED_ENV_PREFIX = "TJ_"


class ObjectRef(ApiModel):
    """A ConfigMap or Secret in the job's namespace whose every key becomes a variable."""

    name: ObjectName
    """Name of the ConfigMap or Secret."""
    optional: Bool | None = None
    """When true, a missing object leaves the variables unset instead of keeping the pod from starting."""


class EnvFromSource(RuledModel):
    """Every key of a ConfigMap or Secret as an environment variable: exactly one of configMapRef or secretRef.
    Variables in env, and those the operator sets, win over these."""

    prefix: Annotated[Str, Field(pattern=ENV_NAME, max_length=256)] | None = None
    """Put before every key, e.g. DATA_. Must not start with TJ_ (the operator's)."""
    config_map_ref: ObjectRef | None = None
    """The ConfigMap."""
    secret_ref: ObjectRef | None = None
    """The Secret."""

    cross_field_rules = (
        Rule(
            field="configMapRef",
            cel="has(self.configMapRef) != has(self.secretRef)",
            message="set exactly one of configMapRef or secretRef",
            reason=Reason.INVALID,
            holds=lambda s: (s.config_map_ref is None) != (s.secret_ref is None),
        ),
        Rule(
            field="prefix",
            cel=f"!has(self.prefix) || !self.prefix.startsWith('{OWNED_ENV_PREFIX}')",
            message=f"a prefix starting with {OWNED_ENV_PREFIX} would set the operator's variables",
            reason=Reason.INVALID,
            holds=lambda s: s.prefix is None or not s.prefix.startswith(OWNED_ENV_PREFIX),
        ),
    )


EnvList = Annotated[list[EnvVar] | None, Field(max_length=128), AfterValidator(unique_by("name"))]
EnvFromList = Annotated[list[EnvFromSource] | None, Field(max_length=16)]
MountList = Annotated[list[VolumeMount] | None, Field(max_length=32), AfterValidator(unique_by("mount_path"))]


class Container(RuledModel):
    """An init container or a sidecar of the role's pods. It gets none of the operator's variables, and the
    securityContext of the trainer unless it changes some of it."""

    name: Annotated[Str, Field(pattern=DNS_LABEL, max_length=63)]
    """Name of the container, unique in the pod; trainer is the operator's."""
    image: Image
    """Container image."""
    image_pull_policy: PullPolicy | None = None
    """When the kubelet pulls the image: Always, IfNotPresent or Never; Kubernetes decides when unset."""
    command: Annotated[list[Argument] | None, Field(min_length=1, max_length=64)] = None
    """The entrypoint; the image's when unset."""
    args: Annotated[list[Argument] | None, Field(max_length=256)] = None
    """Arguments to the entrypoint."""
    working_dir: WorkingDir | None = None
    """The container's working directory; the image's when unset."""
    env: EnvList = Field(default=None, json_schema_extra=list_map("name"))
    """Environment variables. Names the operator sets in the trainer (MASTER_ADDR, RANK, TJ_...) are refused."""
    env_from: EnvFromList = None
    """ConfigMaps and Secrets whose keys become environment variables."""
    volume_mounts: MountList = Field(default=None, json_schema_extra=list_map("mountPath"))
    """Where the role's volumes appear in this container."""
    resources: Resources | None = None
    """Compute resources of the container."""
    security_context: ContainerSecurity | None = None
    """Changes to the role's securityContext for this container only."""

    cross_field_rules = (
        Rule(
            field="name",
            cel=f"self.name != '{CONTAINER_NAME}'",
            message=f"{CONTAINER_NAME} is the name of the operator's container",
            reason=Reason.INVALID,
            holds=lambda c: c.name != CONTAINER_NAME,
        ),
    )
