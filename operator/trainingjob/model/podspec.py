"""Pod-level settings of a role beyond its containers: the pods' own labels and annotations, image pull secrets,
and how the pods spread over the cluster's topology."""

import json
from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, Field

from trainingjob.children.naming import LABEL_PREFIX, OPERATOR_ANNOTATIONS, OPERATOR_LABELS, operator_owned
from trainingjob.model.base import DNS_SUBDOMAIN, LABEL_VALUE, QUALIFIED_NAME, ApiModel, Int, RuledModel, Str, list_map
from trainingjob.model.rules import Reason, Rule

LabelKey = Annotated[Str, Field(pattern=QUALIFIED_NAME, max_length=316)]
LabelValue = Annotated[Str, Field(pattern=LABEL_VALUE, max_length=63)]
ObjectName = Annotated[Str, Field(pattern=DNS_SUBDOMAIN, max_length=253)]


def _not_owned(field: str, owned: tuple[str, ...]) -> Rule:
    """The rule keeping the operator's keys out of the map `field` (labels or annotations)."""
    return Rule(
        field=field,
        cel=f"!has(self.{field})"
        f" || self.{field}.all(k, !k.startsWith('{LABEL_PREFIX}/') && !(k in {json.dumps(owned)}))",
        message=f"{field} under {LABEL_PREFIX}/ and {', '.join(owned)} are set by the operator",
        reason=Reason.INVALID,
        holds=lambda m: not any(operator_owned(k, owned) for k in getattr(m, field) or {}),
    )


class PodMetadata(RuledModel):
    """Labels and annotations of the role's pods, e.g. for a service mesh, cost allocation or a log shipper. The
    job's own labels are on the pods too; the operator's keys win and cannot be set here."""

    labels: Annotated[dict[LabelKey, LabelValue] | None, Field(max_length=64)] = None
    """Labels of each pod; they win over the job's labels of the same key."""
    annotations: Annotated[dict[LabelKey, Annotated[Str, Field(max_length=4096)]] | None, Field(max_length=32)] = None
    """Annotations of each pod."""

    cross_field_rules = (_not_owned("labels", OPERATOR_LABELS), _not_owned("annotations", OPERATOR_ANNOTATIONS))


class LocalObjectReference(ApiModel):
    """An object in the job's namespace, by name."""

    name: ObjectName
    """Name of the object."""


class SelectorOperator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"


class SelectorRequirement(RuledModel):
    """One requirement of a label selector, e.g. {key: trainingjob.io/role, operator: In, values: [worker]}."""

    key: LabelKey
    """The label key."""
    operator: SelectorOperator
    """In, NotIn, Exists or DoesNotExist."""
    values: Annotated[list[LabelValue] | None, Field(max_length=64)] = None
    """The values of In and NotIn; none for Exists and DoesNotExist."""

    cross_field_rules = (
        Rule(
            field="values",
            cel="(self.operator == 'In' || self.operator == 'NotIn') == (has(self.values) && self.values.size() > 0)",
            message="In and NotIn need values; Exists and DoesNotExist take none",
            reason=Reason.INVALID,
            holds=lambda r: (r.operator in (SelectorOperator.IN, SelectorOperator.NOT_IN)) == bool(r.values),
        ),
    )


class LabelSelector(ApiModel):
    """Selects pods by their labels: every matchLabels pair and every matchExpressions requirement must hold."""

    match_labels: Annotated[dict[LabelKey, LabelValue] | None, Field(max_length=32)] = None
    """Labels the pods must have, with these values."""
    match_expressions: Annotated[list[SelectorRequirement] | None, Field(max_length=16)] = None
    """Requirements the pods' labels must meet."""


class Unsatisfiable(StrEnum):
    DO_NOT_SCHEDULE = "DoNotSchedule"
    SCHEDULE_ANYWAY = "ScheduleAnyway"


class InclusionPolicy(StrEnum):
    HONOR = "Honor"
    IGNORE = "Ignore"


def _unique_pairs(constraints: list["TopologySpreadConstraint"]) -> list["TopologySpreadConstraint"]:
    pairs = [(c.topology_key, c.when_unsatisfiable) for c in constraints]
    if len(set(pairs)) != len(pairs):
        raise ValueError("two constraints with the same topologyKey and whenUnsatisfiable")
    return constraints


class TopologySpreadConstraint(RuledModel):
    """How evenly the pods spread over a topology domain, e.g. one worker per node, or workers balanced over
    zones."""

    max_skew: Annotated[Int, Field(ge=1, le=2147483647)]
    """The most the number of matching pods may differ between two domains."""
    topology_key: LabelKey
    """The node label whose values are the domains, e.g. kubernetes.io/hostname or topology.kubernetes.io/zone."""
    when_unsatisfiable: Unsatisfiable
    """DoNotSchedule keeps a pod pending rather than break the skew; ScheduleAnyway only prefers the spread."""
    label_selector: LabelSelector | None = None
    """The pods counted; this job's own pods (label trainingjob.io/job-name) when unset."""
    min_domains: Annotated[Int, Field(ge=1, le=2147483647)] | None = None
    """With DoNotSchedule: the number of domains to spread over even while fewer have nodes."""
    node_affinity_policy: InclusionPolicy | None = None
    """Honor counts only nodes that match the pods' nodeSelector and node affinity (the default); Ignore counts
    every node."""
    node_taints_policy: InclusionPolicy | None = None
    """Honor counts only nodes whose taints the pods tolerate; Ignore (the default) counts every node."""

    cross_field_rules = (
        Rule(
            field="minDomains",
            cel="!has(self.minDomains) || self.whenUnsatisfiable == 'DoNotSchedule'",
            message="minDomains needs whenUnsatisfiable DoNotSchedule",
            reason=Reason.FORBIDDEN,
            holds=lambda c: c.min_domains is None or c.when_unsatisfiable == Unsatisfiable.DO_NOT_SCHEDULE,
        ),
    )


TopologySpreadConstraints = Annotated[
    list[TopologySpreadConstraint] | None, Field(max_length=8), AfterValidator(_unique_pairs)
]
SPREAD_KEYS = list_map("topologyKey", "whenUnsatisfiable")
