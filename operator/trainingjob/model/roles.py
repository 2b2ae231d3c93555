"""The roles of a job (workers, parameter servers): how many pods, what they run and where."""

from typing import Annotated

from pydantic import AfterValidator, Field

from trainingjob.model.base import (
    DNS_SUBDOMAIN,
    LABEL_VALUE,
    QUALIFIED_NAME,
    ApiModel,
    Int,
    Str,
    list_map,
    unique_by,
)
from trainingjob.model.pod import Affinity, EnvVar, PullPolicy, Resources, Toleration
from trainingjob.model.security import RoleSecurity
from trainingjob.model.volumes import Volume, VolumeMount
from trainingjob.rules import Immutable, Reason, Rule

DEFAULT_IMAGE = "ghcr.io/trainingjob/trainer:0.1.0"
Image = Annotated[Str, Field(pattern=r"^[^\s]+$", max_length=512)]
Argument = Annotated[Str, Field(max_length=4096)]
ObjectName = Annotated[Str, Field(pattern=DNS_SUBDOMAIN, max_length=253)]
LabelKey = Annotated[Str, Field(pattern=QUALIFIED_NAME, max_length=316)]
LabelValue = Annotated[Str, Field(pattern=LABEL_VALUE, max_length=63)]


class RoleSpec(ApiModel):
    """The pod settings of one role; every pod of the role gets the same."""

    image: Annotated[Image, Immutable("image")] = DEFAULT_IMAGE
    """Container image. The default is the built-in trainer; any image with PyTorch runs a user command."""
    image_pull_policy: PullPolicy | None = None
    """When the kubelet pulls the image: Always, IfNotPresent or Never; Kubernetes decides when unset."""
    command: Annotated[list[Argument] | None, Field(min_length=1, max_length=64), Immutable("command")] = None
    """The container's entrypoint, e.g. [torchrun, train.py] or [python, train.py]; exactly one of
    spec.trainer or
    a command must be given. torchrun reads its settings (nnodes, node rank, master) from the environment."""
    args: Annotated[list[Argument] | None, Field(max_length=256), Immutable("args")] = None
    """Arguments to the command."""
    working_dir: Annotated[Str, Field(pattern=r"^/", max_length=1024)] | None = None
    """The container's working directory; the image's when unset."""
    env: Annotated[list[EnvVar] | None, Field(max_length=128), AfterValidator(unique_by("name"))] = Field(
        default=None, json_schema_extra=list_map("name")
    )
    """Extra environment variables. The operator adds the torch and trainer ones (MASTER_ADDR, RANK,
    TJ_...)."""
    resources: Resources | None = None
    """Compute resources of each pod, e.g. {limits: {nvidia.com/gpu: 1}}."""
    volumes: Annotated[list[Volume] | None, Field(max_length=32), AfterValidator(unique_by("name"))] = Field(
        default=None, json_schema_extra=list_map("name")
    )
    """Volumes of each pod. The checkpoint volume is added by the operator."""
    volume_mounts: Annotated[
        list[VolumeMount] | None, Field(max_length=32), AfterValidator(unique_by("mount_path"))
    ] = Field(default=None, json_schema_extra=list_map("mountPath"))
    """Where the volumes appear in the container."""
    node_selector: Annotated[dict[LabelKey, LabelValue] | None, Field(max_length=32)] = None
    """Node labels the pods must run on, e.g. {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}."""
    tolerations: Annotated[list[Toleration] | None, Field(max_length=32)] = None
    """Taints the pods tolerate, e.g. the nvidia.com/gpu taint of GPU nodes."""
    affinity: Affinity | None = None
    """Node and pod affinity of the pods."""
    priority_class_name: ObjectName | None = None
    """PriorityClass of this role's pods; overrides spec.scheduling.priorityClassName."""
    service_account_name: ObjectName | None = None
    """ServiceAccount the pods run as; the namespace's default when unset."""
    security_context: RoleSecurity = Field(default_factory=RoleSecurity, json_schema_extra={"default": {}})
    """What the pods may do on their node; the defaults pass Pod Security "restricted"."""
    termination_grace_period_seconds: Annotated[Int, Field(ge=0, le=86400)] = 120
    """How long a stopped pod has to write its final checkpoint and exit before it is killed."""

    cross_field_rules = (
        Rule(
            field="args",
            cel="!has(self.args) || has(self.command)",
            message="args need a command",
            reason=Reason.FORBIDDEN,
            holds=lambda r: r.args is None or r.command is not None,
        ),
        Rule(
            field="volumeMounts",
            cel="!has(self.volumeMounts) || self.volumeMounts.all(m,"
            " has(self.volumes) && self.volumes.exists(v, v.name == m.name))",
            message="every volumeMounts[].name must be the name of one of the role's volumes",
            reason=Reason.INVALID,
            holds=lambda r: {m.name for m in r.volume_mounts or []} <= {v.name for v in r.volumes or []},
        ),
    )


class WorkerSpec(RoleSpec):
    """The workers: in DDP mode every worker is a rank and worker 0 is the rendezvous master."""

    replicas: Annotated[Int, Field(ge=1, le=4096), Immutable("replicas")] = 1
    """Number of worker pods."""
    nproc_per_pod: Annotated[Int, Field(ge=1, le=64), Immutable("nprocPerPod")] = 1
    """Processes per worker pod (torchrun's nproc_per_node), usually the pod's GPU count. The built-in trainer
    starts them itself; a command is expected to be torchrun, which reads PET_NPROC_PER_NODE."""


class ParameterServerSpec(RoleSpec):
    """The parameter servers of ParameterServer mode: they hold the model and apply the workers' gradients."""

    replicas: Annotated[Int, Field(ge=1, le=256), Immutable("replicas")] = 1
    """Number of parameter-server pods; the model's parameters are sharded over them."""
