"""Pod settings of a role: a structural subset of the Kubernetes pod spec, validated like Kubernetes does."""

import json
import re
from decimal import Decimal
from enum import StrEnum
from typing import Annotated

from pydantic import Field

from trainingjob.children import contract
from trainingjob.model.base import (
    DNS_SUBDOMAIN,
    LABEL_VALUE,
    QUALIFIED_NAME,
    QUANTITY,
    ApiModel,
    Bool,
    Int,
    Quantity,
    RuledModel,
    Str,
    parse_quantity,
)
from trainingjob.model.rules import Reason, Rule

_OWNED_ENV = sorted(contract.ALL_VARIABLES)
ENV_NAME = r"^[-._a-zA-Z][-._a-zA-Z0-9]*$"
# A key of a ConfigMap or Secret: not '.', not '..', not starting with '..'.
DATA_KEY = r"^\.?[-_a-zA-Z0-9][-._a-zA-Z0-9]*$"
# What a pod's env can read of it (Kubernetes' validEnvDownwardAPIFieldPathExpressions, and one label or annotation).
POD_FIELD_PATH = (
    r"^(metadata\.(name|namespace|uid)|spec\.(nodeName|serviceAccountName)|status\.(hostIPs?|podIPs?)"
    r"|metadata\.(labels|annotations)\['[^']+'\])$"
)
CONTAINER_RESOURCE_PATH = r"^(limits|requests)\.(cpu|memory|ephemeral-storage|hugepages-.+)$"
ResourceName = Annotated[Str, Field(pattern=QUALIFIED_NAME, max_length=253)]
ResourceList = Annotated[dict[ResourceName, Quantity], Field(max_length=16)]


class PullPolicy(StrEnum):
    ALWAYS = "Always"
    IF_NOT_PRESENT = "IfNotPresent"
    NEVER = "Never"


class TolerationOperator(StrEnum):
    EXISTS = "Exists"
    EQUAL = "Equal"


class TaintEffect(StrEnum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


class KeySelector(ApiModel):
    """Selects one key of a Secret or ConfigMap."""

    name: Annotated[Str, Field(pattern=DNS_SUBDOMAIN, max_length=253)]
    """Name of the Secret or ConfigMap in the job's namespace."""
    key: Annotated[Str, Field(pattern=DATA_KEY, max_length=253)]
    """The key whose value becomes the variable's value."""
    optional: Bool | None = None
    """When true, a missing object or key leaves the variable unset instead of failing the pod."""


class FieldSelector(ApiModel):
    """Selects a field of the pod, e.g. metadata.name or status.podIP."""

    field_path: Annotated[Str, Field(pattern=POD_FIELD_PATH, max_length=256)]
    """Path of the field in the pod: metadata.name, metadata.namespace, metadata.uid, metadata.labels['KEY'],
    metadata.annotations['KEY'], spec.nodeName, spec.serviceAccountName, status.hostIP(s) or status.podIP(s)."""
    api_version: Annotated[Str, Field(pattern=r"^v1$")] | None = None
    """Version of the schema the path is written in: v1 (the default)."""


class ResourceFieldSelector(ApiModel):
    """Selects a resource limit or request of the container, e.g. limits.memory."""

    resource: Annotated[Str, Field(pattern=CONTAINER_RESOURCE_PATH, max_length=256)]
    """The resource: limits. or requests. and cpu, memory, ephemeral-storage or hugepages-SIZE."""
    divisor: Quantity | None = None
    """The unit the value is expressed in; 1 when unset."""


class EnvVarSource(RuledModel):
    """Where a variable's value comes from: exactly one of the selectors."""

    secret_key_ref: KeySelector | None = None
    """A key of a Secret."""
    config_map_key_ref: KeySelector | None = None
    """A key of a ConfigMap."""
    field_ref: FieldSelector | None = None
    """A field of the pod."""
    resource_field_ref: ResourceFieldSelector | None = None
    """A resource limit or request of the container."""

    cross_field_rules = (
        Rule(
            field="secretKeyRef",
            cel="[has(self.secretKeyRef), has(self.configMapKeyRef), has(self.fieldRef),"
            " has(self.resourceFieldRef)].filter(x, x).size() == 1",
            message="set exactly one of secretKeyRef, configMapKeyRef, fieldRef or resourceFieldRef",
            reason=Reason.INVALID,
            holds=lambda s: (
                [s.secret_key_ref, s.config_map_key_ref, s.field_ref, s.resource_field_ref].count(None) == 3
            ),
        ),
    )


class EnvVar(RuledModel):
    """An environment variable of the role's container."""

    name: Annotated[Str, Field(pattern=ENV_NAME, max_length=256)]
    """Name of the variable. Names the operator sets itself (MASTER_ADDR, RANK, TJ_..., see the trainer
    contract)
    are refused."""
    value: Annotated[Str, Field(max_length=32768)] | None = None
    """The value; $(OTHER) references to earlier variables are expanded by the kubelet."""
    value_from: EnvVarSource | None = None
    """Take the value from a Secret, ConfigMap, pod field or resource instead of value."""

    cross_field_rules = (
        Rule(
            field="name",
            cel=f"!(self.name in {json.dumps(_OWNED_ENV)}) && !self.name.startsWith('TJ_')",
            message="this variable is set by the operator (the trainer contract) and cannot be overridden",
            reason=Reason.INVALID,
            holds=lambda e: e.name not in contract.ALL_VARIABLES and not e.name.startswith("TJ_"),
        ),
        Rule(
            field="valueFrom",
            cel="!has(self.value) || !has(self.valueFrom)",
            message="set value or valueFrom, not both",
            reason=Reason.FORBIDDEN,
            holds=lambda e: e.value is None or e.value_from is None,
        ),
    )


def _extended(name: str) -> bool:
    """Kubernetes' test: a resource with a domain outside kubernetes.io (nvidia.com/gpu) is extended."""
    return "/" in name and "kubernetes.io/" not in name


_EXTENDED_CEL = "k.contains('/') && !k.contains('kubernetes.io/')"
STANDARD_RESOURCES = ("cpu", "memory", "ephemeral-storage")
HUGEPAGES = "hugepages-"
_LONGEST_EXTENDED_DOMAIN = 253 - len("requests.")  # Kubernetes also names the resource's quota requests.NAME


def _container_resource(name: str) -> bool:
    """Kubernetes' test of a container's resource name: cpu, memory, ephemeral-storage, hugepages-SIZE, or a
    name with a domain (nvidia.com/gpu) that is not a quota's (requests.*)."""
    if "/" not in name:
        return name in STANDARD_RESOURCES or name.startswith("hugepages-")
    return "kubernetes.io/" in name or (
        not name.startswith("requests.") and name.index("/") <= _LONGEST_EXTENDED_DOMAIN
    )


def _resource_names_rule(field: str) -> Rule:
    """The rule that every key of the resource list `field` (requests or limits) is a container's resource."""
    return Rule(
        field=field,
        cel=f"!has(self.{field}) || self.{field}.all(k, k.contains('/') ? (k.contains('kubernetes.io/')"
        f" || !k.startsWith('requests.') && k.indexOf('/') <= {_LONGEST_EXTENDED_DOMAIN})"
        f" : (k in {json.dumps(list(STANDARD_RESOURCES))} || k.startsWith('hugepages-')))",
        message=f"a container's resources are {', '.join(STANDARD_RESOURCES)}, hugepages-SIZE, or have a domain,"
        " e.g. nvidia.com/gpu (gpu alone is no resource)",
        reason=Reason.INVALID,
        holds=lambda r: all(_container_resource(name) for name in getattr(r, field) or {}),
    )


def _requests_within_limits(resources: "Resources") -> bool:
    requests, limits = resources.requests or {}, resources.limits or {}
    return all(parse_quantity(v) <= parse_quantity(limits[k]) for k, v in requests.items() if k in limits)


def _extended_are_whole(resources: "Resources") -> bool:
    return all(parse_quantity(v) % 1 == 0 for k, v in _amounts(resources) if _extended(k))


def _extended_requests_are_limits(resources: "Resources") -> bool:
    """An extended resource or huge pages cannot be overcommitted: a request needs the same limit."""
    limits = resources.limits or {}
    return all(
        k in limits and parse_quantity(v) == parse_quantity(limits[k])
        for k, v in (resources.requests or {}).items()
        if _extended(k) or k.startswith(HUGEPAGES)
    )


def _page_size(name: str) -> Decimal | None:
    """The page size of hugepages-SIZE: a positive whole number of bytes, or None."""
    size = name.removeprefix(HUGEPAGES)
    if not re.fullmatch(QUANTITY, size) or (value := parse_quantity(size)) <= 0 or value % 1:
        return None
    return value


def _huge_pages_whole(resources: "Resources") -> bool:
    """Every hugepages-SIZE amount is a whole number of pages of a valid SIZE (0 included)."""
    for name, amount in _amounts(resources):
        if name.startswith(HUGEPAGES):
            size, value = _page_size(name), parse_quantity(amount)
            if size is None or value % 1 or value % size:
                return False
    return True


def _huge_pages_with_cpu_or_memory(resources: "Resources") -> bool:
    names = {name for name, _ in _amounts(resources)}
    return not any(n.startswith(HUGEPAGES) for n in names) or bool(names & {"cpu", "memory"})


def _amounts(resources: "Resources") -> list[tuple[str, int | str]]:
    return [*(resources.requests or {}).items(), *(resources.limits or {}).items()]


_BOTH_CEL = "[has(self.requests) ? self.requests : {}, has(self.limits) ? self.limits : {}]"
_SIZE_CEL = f"quantity(k.substring({len(HUGEPAGES)}))"


class Resources(RuledModel):
    """Compute resources of each container of the role, e.g. cpu, memory and nvidia.com/gpu."""

    requests: ResourceList | None = None
    """The minimum the scheduler reserves for each pod, e.g. {cpu: "2", memory: 8Gi}."""
    limits: ResourceList | None = None
    """The most each pod may use, e.g. {nvidia.com/gpu: 1}. GPUs are requested here."""

    cross_field_rules = (
        _resource_names_rule("requests"),
        _resource_names_rule("limits"),
        Rule(
            field="requests",
            cel="!has(self.requests) || !has(self.limits) || self.requests.all(k, !(k in self.limits) ||"
            " quantity(string(self.requests[k])).compareTo(quantity(string(self.limits[k]))) <= 0)",
            message="every request must be less than or equal to its limit",
            reason=Reason.INVALID,
            holds=_requests_within_limits,
        ),
        Rule(
            field="limits",
            cel=f"{_BOTH_CEL}.all(m, m.all(k, !({_EXTENDED_CEL}) || quantity(string(m[k])).isInteger()))",
            message="extended resources such as nvidia.com/gpu must be whole numbers",
            reason=Reason.INVALID,
            holds=_extended_are_whole,
        ),
        Rule(
            field="requests",
            cel=f"!has(self.requests) || self.requests.all(k, !({_EXTENDED_CEL} || k.startsWith('{HUGEPAGES}'))"
            " || has(self.limits) && k in self.limits"
            " && quantity(string(self.requests[k])).compareTo(quantity(string(self.limits[k]))) == 0)",
            message="an extended resource such as nvidia.com/gpu, or hugepages-SIZE, cannot be overcommitted: set"
            " its limit, equal to its request (or set only the limit)",
            reason=Reason.INVALID,
            holds=_extended_requests_are_limits,
        ),
        Rule(
            field="limits",
            cel=f"{_BOTH_CEL}.all(m, m.all(k, !k.startsWith('{HUGEPAGES}') || isQuantity(k.substring({len(HUGEPAGES)}))"
            f" && {_SIZE_CEL}.isInteger() && {_SIZE_CEL}.asInteger() > 0 && quantity(string(m[k])).isInteger()"
            f" && quantity(string(m[k])).asInteger() % {_SIZE_CEL}.asInteger() == 0))",
            message="hugepages-SIZE needs a SIZE of whole bytes (2Mi, 1Gi) and a whole number of pages of it",
            reason=Reason.INVALID,
            holds=_huge_pages_whole,
        ),
        Rule(
            field="limits",
            cel=f"!{_BOTH_CEL}.exists(m, m.exists(k, k.startsWith('{HUGEPAGES}')))"
            f" || {_BOTH_CEL}.exists(m, 'cpu' in m || 'memory' in m)",
            message="huge pages need a cpu or memory request or limit beside them",
            reason=Reason.FORBIDDEN,
            holds=_huge_pages_with_cpu_or_memory,
        ),
    )


class Toleration(RuledModel):
    """Lets the role's pods run on nodes with a matching taint, e.g. GPU nodes."""

    key: Annotated[Str, Field(pattern=QUALIFIED_NAME, max_length=316)] | None = None
    """The taint key; empty with operator Exists matches every taint."""
    operator: TolerationOperator | None = None
    """Equal (the default) compares the value; Exists matches any value."""
    value: Annotated[Str, Field(pattern=LABEL_VALUE, max_length=63)] | None = None
    """The taint value to match when operator is Equal."""
    effect: TaintEffect | None = None
    """The taint effect to match; empty matches every effect."""
    toleration_seconds: Int | None = None
    """How long a pod stays on a node after a NoExecute taint appears; forever when unset."""

    cross_field_rules = (
        Rule(
            field="value",
            cel="!has(self.operator) || self.operator != 'Exists' || !has(self.value) || self.value == ''",
            message="value must be empty when operator is Exists",
            reason=Reason.FORBIDDEN,
            holds=lambda t: t.operator != TolerationOperator.EXISTS or not t.value,
        ),
        Rule(
            field="tolerationSeconds",
            cel="!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')",
            message="tolerationSeconds needs effect NoExecute",
            reason=Reason.FORBIDDEN,
            holds=lambda t: t.toleration_seconds is None or t.effect == TaintEffect.NO_EXECUTE,
        ),
    )
