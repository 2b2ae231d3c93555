"""The roles of a job (workers, parameter servers): how many pods, what they run and where."""

from functools import partial
from typing import Annotated

from pydantic import AfterValidator, Field

from trainingjob.model.affinity import Affinity
from trainingjob.model.base import Int, Quantity, RuledModel, list_map, parse_quantity, unique_by
from trainingjob.model.budget import role_rules
from trainingjob.model.containers import (
    Argument,
    Container,
    EnvFromList,
    EnvList,
    Image,
    MountList,
    ObjectName,
    WorkingDir,
)
from trainingjob.model.pod import PullPolicy, Resources, Toleration
from trainingjob.model.podspec import (
    SPREAD_KEYS,
    LabelKey,
    LabelValue,
    LocalObjectReference,
    PodMetadata,
    TopologySpreadConstraints,
)
from trainingjob.model.rules import Immutable, Reason, Rule
from trainingjob.model.security import RoleSecurity
from trainingjob.model.volumes import Volume

MAX_WORKERS = 10_240  # a DDP gang's status records them in a few bytes (model/tracked.py)
MAX_PS_WORKERS = 4_096  # a parameter-server job's workers are each replaced alone: a status record each
MAX_PARAMETER_SERVERS = 256
MAX_PODS = MAX_WORKERS + MAX_PARAMETER_SERVERS  # of one attempt

DEFAULT_SHM_SIZE = "1Gi"
ContainerList = Annotated[list[Container] | None, Field(max_length=8), AfterValidator(unique_by("name"))]
_CONTAINER_LISTS = ("initContainers", "sidecars")


def _mounts_cel(mounts: str) -> str:
    """CEL: every mount in the list expression `mounts` names one of the role's volumes."""
    return f"{mounts}.all(m, has(self.volumes) && self.volumes.exists(v, v.name == m.name))"


def _mounted_volumes_exist(role: "RoleSpec", containers: str) -> bool:
    volumes = {v.name for v in role.volumes or []}
    return all({m.name for m in c.volume_mounts or []} <= volumes for c in role.containers(containers))


class RoleSpec(RuledModel):
    """The pod settings of one role; every pod of the role gets the same."""

    image: Annotated[Image | None, Immutable("image")] = None
    """Container image; any image with PyTorch runs a user command. When unset, the operator's default trainer
    image (TJ_OPERATOR_DEFAULT_TRAINER_IMAGE, chart value operator.settings.defaultTrainerImage), recorded in
    status.defaultImage when the job first creates pods so that every restart runs the image it started
    with."""
    image_pull_policy: PullPolicy | None = None
    """When the kubelet pulls the image: Always, IfNotPresent or Never; Kubernetes decides when unset."""
    command: Annotated[list[Argument] | None, Field(min_length=1, max_length=64), Immutable("command")] = None
    """The container's entrypoint, e.g. [torchrun, train.py] or [python, train.py]; exactly one of
    spec.trainer or
    a command must be given. torchrun reads its settings (nnodes, node rank, master) from the environment."""
    args: Annotated[list[Argument] | None, Field(max_length=256), Immutable("args")] = None
    """Arguments to the command."""
    working_dir: WorkingDir | None = None
    """The container's working directory; the image's when unset."""
    env: EnvList = Field(default=None, json_schema_extra=list_map("name"))
    """Extra environment variables. The operator adds the torch and trainer ones (MASTER_ADDR, RANK,
    TJ_...)."""
    env_from: EnvFromList = None
    """ConfigMaps and Secrets whose keys become environment variables; env and the operator's variables win
    over them."""
    resources: Resources | None = None
    """Compute resources of each pod, e.g. {limits: {nvidia.com/gpu: 1}}."""
    volumes: Annotated[list[Volume] | None, Field(max_length=32), AfterValidator(unique_by("name"))] = Field(
        default=None, json_schema_extra=list_map("name")
    )
    """Volumes of each pod, for any of its containers to mount. The operator adds its own: the checkpoint
    volume, the job's key and /dev/shm."""
    volume_mounts: MountList = Field(default=None, json_schema_extra=list_map("mountPath"))
    """Where the volumes appear in the trainer's container. /dev/shm is the operator's (see shmSize)."""
    init_containers: ContainerList = Field(default=None, json_schema_extra=list_map("name"))
    """Containers that run to completion, in order, before the trainer starts (after the sidecars), e.g. to
    fetch a data set into a shared emptyDir volume."""
    sidecars: ContainerList = Field(default=None, json_schema_extra=list_map("name"))
    """Containers that start, in order, before the init containers and run beside the trainer until it ends
    (Kubernetes native sidecars: init containers with restartPolicy Always), e.g. a log shipper or a proxy."""
    image_pull_secrets: Annotated[
        list[LocalObjectReference] | None, Field(max_length=16), AfterValidator(unique_by("name"))
    ] = Field(default=None, json_schema_extra=list_map("name"))
    """Secrets in the job's namespace holding the credentials to pull the pods' images."""
    pod_metadata: PodMetadata | None = None
    """Labels and annotations of the role's pods."""
    node_selector: Annotated[dict[LabelKey, LabelValue] | None, Field(max_length=32)] = None
    """Node labels the pods must run on, e.g. {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}."""
    tolerations: Annotated[list[Toleration] | None, Field(max_length=32)] = None
    """Taints the pods tolerate, e.g. the nvidia.com/gpu taint of GPU nodes."""
    affinity: Affinity | None = None
    """Node and pod affinity of the pods."""
    topology_spread_constraints: TopologySpreadConstraints = Field(default=None, json_schema_extra=SPREAD_KEYS)
    """How the pods spread over nodes or zones, e.g. [{maxSkew: 1, topologyKey: kubernetes.io/hostname,
    whenUnsatisfiable: DoNotSchedule}] for one pod per node."""
    priority_class_name: ObjectName | None = None
    """PriorityClass of this role's pods; overrides spec.scheduling.priorityClassName."""
    service_account_name: ObjectName | None = None
    """ServiceAccount the pods run as; the namespace's default when unset."""
    runtime_class_name: ObjectName | None = None
    """RuntimeClass of the pods, e.g. nvidia or a sandboxed runtime; the node's default runtime when unset."""
    security_context: RoleSecurity = Field(default_factory=RoleSecurity, json_schema_extra={"default": {}})
    """What the pods may do on their node; the defaults pass Pod Security "restricted"."""
    shm_size: Quantity = DEFAULT_SHM_SIZE
    """Size of /dev/shm, a memory-backed emptyDir the operator mounts in every container of the pods (the
    container runtime's 64Mi is too small for DataLoader workers). Pages written there count against the
    memory limit of the container that writes them, and the kubelet caps the volume at the pod's memory
    limit."""
    termination_grace_period_seconds: Annotated[Int, Field(ge=0, le=86400)] = 120
    """How long a stopped pod has to write its final checkpoint and exit before it is killed."""

    cross_field_rules = (
        *role_rules(),
        Rule(
            field="args",
            cel="!has(self.args) || has(self.command)",
            message="args need a command",
            reason=Reason.FORBIDDEN,
            holds=lambda r: r.args is None or r.command is not None,
        ),
        Rule(
            field="volumeMounts",
            cel="!has(self.volumeMounts) || " + _mounts_cel("self.volumeMounts"),
            message="every volumeMounts[].name must be the name of one of the role's volumes",
            reason=Reason.INVALID,
            holds=lambda r: {m.name for m in r.volume_mounts or []} <= {v.name for v in r.volumes or []},
        ),
        *(
            Rule(
                field=containers,
                cel=f"!has(self.{containers}) || self.{containers}.all(c, !has(c.volumeMounts) || "
                + _mounts_cel("c.volumeMounts")
                + ")",
                message=f"every {containers}[].volumeMounts[].name must be the name of one of the role's volumes",
                reason=Reason.INVALID,
                holds=partial(_mounted_volumes_exist, containers=containers),
            )
            for containers in _CONTAINER_LISTS
        ),
        Rule(
            field="sidecars",
            cel="!has(self.initContainers) || !has(self.sidecars)"
            " || self.sidecars.all(s, !self.initContainers.exists(c, c.name == s.name))",
            message="a sidecar and an init container have the same name",
            reason=Reason.INVALID,
            holds=lambda r: not {c.name for c in r.init_containers or []} & {c.name for c in r.sidecars or []},
        ),
        Rule(
            field="shmSize",
            cel="quantity(string(self.shmSize)).isGreaterThan(quantity('0'))",
            message="shmSize must be more than 0",
            reason=Reason.INVALID,
            holds=lambda r: parse_quantity(r.shm_size) > 0,
        ),
    )

    def containers(self, kind: str) -> list[Container]:
        """The role's initContainers or sidecars."""
        return (self.init_containers if kind == "initContainers" else self.sidecars) or []

    def mount_paths(self, containers: str) -> set[str]:
        """Where volumes are mounted in the trainer's container (volumeMounts), or in the initContainers or the
        sidecars."""
        if containers == "volumeMounts":
            return {m.mount_path for m in self.volume_mounts or []}
        return {m.mount_path for c in self.containers(containers) for m in c.volume_mounts or []}


class WorkerSpec(RoleSpec):
    """The workers: in DDP mode every worker is a rank and worker 0 is the rendezvous master."""

    replicas: Annotated[Int, Field(ge=1, le=MAX_WORKERS), Immutable("replicas")] = 1
    """Number of worker pods."""
    min_replicas: Annotated[Int, Field(ge=1, le=MAX_WORKERS)] | None = None
    """Elastic jobs: the fewest worker pods the job may train with when capacity is lost (a node gone and no room
    for its pods); at most replicas, and replicas when unset (not elastic). In DDP mode it is how few ranks a
    restart may start with (the operator resizes the job, status.scale); in ParameterServer mode workers 0 to
    minReplicas-1 must start within the startup deadline, and a worker from minReplicas on that the scheduler cannot
    place waits for room without a deadline (status.scale says which)."""
    nproc_per_pod: Annotated[Int, Field(ge=1, le=64), Immutable("nprocPerPod")] = 1
    """Processes per worker pod (torchrun's nproc_per_node), usually the pod's GPU count. The built-in trainer
    starts them itself; a command is expected to be torchrun, which reads PET_NPROC_PER_NODE."""

    cross_field_rules = (
        *RoleSpec.cross_field_rules,
        Rule(
            field="minReplicas",
            cel="!has(self.minReplicas) || self.minReplicas <= self.replicas",
            message="minReplicas must not exceed replicas",
            reason=Reason.INVALID,
            holds=lambda w: w.min_replicas is None or w.min_replicas <= w.replicas,
        ),
    )

    @property
    def fewest_replicas(self) -> int:
        """The fewest workers the job may train with: minReplicas, or replicas when the job is not elastic."""
        return self.replicas if self.min_replicas is None else self.min_replicas


class ParameterServerSpec(RoleSpec):
    """The parameter servers of ParameterServer mode: they hold the model and apply the workers' gradients."""

    replicas: Annotated[Int, Field(ge=1, le=MAX_PARAMETER_SERVERS), Immutable("replicas")] = 1
    """Number of parameter-server pods; the model's parameters are sharded over them."""
