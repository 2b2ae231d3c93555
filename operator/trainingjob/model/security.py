"""What a role's pods may do on their node. The defaults pass Pod Security "restricted"; each field loosens one
thing for images or hardware that need it."""

from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, Field

from trainingjob.model.base import LIST_SET, Bool, Int, RuledModel, Str, unique_values
from trainingjob.model.rules import Reason, Rule

TRAINER_UID = 10001
"""The trainer image's own user and group."""

Id = Annotated[Int, Field(ge=0, le=2147483647)]
Capability = Annotated[Str, Field(pattern=r"^[A-Z][A-Z_]*$", max_length=64)]


class SeccompProfile(StrEnum):
    RUNTIME_DEFAULT = "RuntimeDefault"
    UNCONFINED = "Unconfined"


class FsGroupChangePolicy(StrEnum):
    ON_ROOT_MISMATCH = "OnRootMismatch"
    ALWAYS = "Always"


class RoleSecurity(RuledModel):
    """The pods' security context. Defaults: a non-root user, no privilege escalation, every capability dropped,
    the runtime's default seccomp profile, and the volumes' group set so the trainer can write its checkpoints.
    Anything looser than the defaults is refused in a namespace that enforces Pod Security "restricted"."""

    run_as_user: Id = TRAINER_UID
    """The user the containers run as (the trainer image's user by default). 0 needs runAsNonRoot: false."""
    run_as_group: Id = TRAINER_UID
    """The containers' primary group."""
    fs_group: Id = TRAINER_UID
    """The group that owns the pods' volumes (a new PersistentVolume is owned by root), so the trainer can write
    its checkpoints there."""
    supplemental_groups: Annotated[list[Id] | None, Field(max_length=32), AfterValidator(unique_values)] = Field(
        default=None, json_schema_extra=LIST_SET
    )
    """More groups of the containers' processes, e.g. the group that may read a shared dataset volume."""
    fs_group_change_policy: FsGroupChangePolicy = FsGroupChangePolicy.ON_ROOT_MISMATCH
    """OnRootMismatch changes a volume's ownership only when its root does not match yet (fast on large volumes);
    Always does it at every pod start."""
    run_as_non_root: Bool = True
    """Refuse to start a container as root. false allows runAsUser: 0."""
    allow_privilege_escalation: Bool = False
    """Let a process gain more privileges than its parent (setuid binaries)."""
    add_capabilities: Annotated[list[Capability] | None, Field(max_length=16), AfterValidator(unique_values)] = Field(
        default=None, json_schema_extra=LIST_SET
    )
    """Linux capabilities added back after all are dropped, e.g. [IPC_LOCK] for RDMA. Only NET_BIND_SERVICE
    passes Pod Security "restricted"."""
    seccomp_profile: SeccompProfile = SeccompProfile.RUNTIME_DEFAULT
    """The seccomp profile of the containers."""

    cross_field_rules = (
        Rule(
            field="runAsUser",
            cel="!has(self.runAsUser) || self.runAsUser != 0 || (has(self.runAsNonRoot) && !self.runAsNonRoot)",
            message="runAsUser 0 (root) needs runAsNonRoot: false",
            reason=Reason.INVALID,
            holds=lambda s: s.run_as_user != 0 or not s.run_as_non_root,
        ),
    )

    def pod_context(self) -> dict[str, object]:
        """The pod's securityContext."""
        context: dict[str, object] = {
            "runAsUser": self.run_as_user,
            "runAsGroup": self.run_as_group,
            "runAsNonRoot": self.run_as_non_root,
            "seccompProfile": {"type": self.seccomp_profile.value},
            "fsGroup": self.fs_group,
            "fsGroupChangePolicy": self.fs_group_change_policy.value,
        }
        if self.supplemental_groups:
            context["supplementalGroups"] = list(self.supplemental_groups)
        return context

    def container_context(self) -> dict[str, object]:
        """The container's securityContext."""
        capabilities: dict[str, list[str]] = {"drop": ["ALL"]}
        if self.add_capabilities:
            capabilities["add"] = list(self.add_capabilities)
        return {"allowPrivilegeEscalation": self.allow_privilege_escalation, "capabilities": capabilities}


class ContainerSecurity(RuledModel):
    """What one init or sidecar container may do, where it differs from its role's securityContext: every unset
    field is the role's, so by default the container is as restricted as the trainer's."""

    run_as_user: Id | None = None
    """The user the container runs as; the role's runAsUser when unset. 0 needs runAsNonRoot: false here."""
    run_as_group: Id | None = None
    """The container's primary group; the role's runAsGroup when unset."""
    run_as_non_root: Bool | None = None
    """Refuse to start the container as root; the role's runAsNonRoot when unset."""
    allow_privilege_escalation: Bool | None = None
    """Let a process gain more privileges than its parent; the role's allowPrivilegeEscalation when unset."""
    add_capabilities: Annotated[list[Capability] | None, Field(max_length=16), AfterValidator(unique_values)] = Field(
        default=None, json_schema_extra=LIST_SET
    )
    """Linux capabilities added back after all are dropped; the role's addCapabilities when unset, none when
    []."""

    cross_field_rules = (
        Rule(
            field="runAsUser",
            cel="!has(self.runAsUser) || self.runAsUser != 0 || (has(self.runAsNonRoot) && !self.runAsNonRoot)",
            message="runAsUser 0 (root) needs runAsNonRoot: false on the same container",
            reason=Reason.INVALID,
            holds=lambda s: s.run_as_user != 0 or s.run_as_non_root is False,
        ),
    )

    def container_context(self, role: RoleSecurity) -> dict[str, object]:
        """The container's securityContext: the role's container context with this container's changes."""
        changed = role.model_copy(update=self.model_dump(by_alias=False, exclude_none=True))
        identity = self.model_dump(include={"run_as_user", "run_as_group", "run_as_non_root"}, exclude_none=True)
        return {**identity, **changed.container_context()}
