"""Node and pod affinity of a role's pods, checked as Kubernetes checks a pod's: operators, the values each operator
takes, label keys and values, weights, topology keys."""

from enum import StrEnum
from typing import Annotated

from pydantic import Field

from trainingjob.model.base import DNS_LABEL, ApiModel, Int, RuledModel, Str
from trainingjob.model.podspec import LabelKey, LabelSelector, LabelValue
from trainingjob.model.rules import Reason, Rule

Weight = Annotated[Int, Field(ge=1, le=100)]
Namespace = Annotated[Str, Field(pattern=DNS_LABEL, max_length=63)]


class NodeOperator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    GT = "Gt"
    LT = "Lt"


def _values_fit(requirement: "NodeSelectorRequirement") -> bool:
    count = len(requirement.values or [])
    if requirement.operator in (NodeOperator.IN, NodeOperator.NOT_IN):
        return count > 0
    if requirement.operator in (NodeOperator.GT, NodeOperator.LT):
        return count == 1
    return count == 0


class NodeSelectorRequirement(RuledModel):
    """One requirement on a node's labels, e.g. {key: nvidia.com/gpu.product, operator: In, values: [H100]}."""

    key: LabelKey
    """The node label key."""
    operator: NodeOperator
    """In, NotIn, Exists, DoesNotExist, Gt or Lt."""
    values: Annotated[list[LabelValue] | None, Field(max_length=64)] = None
    """One or more values for In and NotIn, exactly one (a number) for Gt and Lt, none for Exists and
    DoesNotExist."""

    cross_field_rules = (
        Rule(
            field="values",
            cel="(has(self.values) ? self.values.size() : 0)"
            " == 0 ? (self.operator == 'Exists' || self.operator == 'DoesNotExist')"
            " : (self.operator == 'In' || self.operator == 'NotIn'"
            " || (self.operator in ['Gt', 'Lt'] && self.values.size() == 1))",
            message="In and NotIn need values, Gt and Lt exactly one, Exists and DoesNotExist none",
            reason=Reason.INVALID,
            holds=_values_fit,
        ),
    )


class FieldOperator(StrEnum):
    IN = "In"
    NOT_IN = "NotIn"


class NodeFieldRequirement(ApiModel):
    """A requirement on a node's name: {key: metadata.name, operator: In, values: [NODE]}."""

    key: Annotated[Str, Field(pattern=r"^metadata\.name$")]
    """metadata.name, the only node field a pod may select on."""
    operator: FieldOperator
    """In or NotIn."""
    values: Annotated[list[Str], Field(min_length=1, max_length=1)]
    """Exactly one node name."""


class NodeSelectorTerm(ApiModel):
    """Requirements that must all hold on a node; an empty term matches no node."""

    match_expressions: Annotated[list[NodeSelectorRequirement] | None, Field(max_length=16)] = None
    """Requirements on the node's labels."""
    match_fields: Annotated[list[NodeFieldRequirement] | None, Field(max_length=4)] = None
    """Requirements on the node's name."""


class NodeSelector(ApiModel):
    """Terms of which a node must match at least one."""

    node_selector_terms: Annotated[list[NodeSelectorTerm], Field(min_length=1, max_length=8)]
    """At least one term."""


class PreferredSchedulingTerm(ApiModel):
    """A term the scheduler prefers nodes to match, with its weight."""

    weight: Weight
    """1 to 100: how much a matching node is preferred."""
    preference: NodeSelectorTerm | None = None
    """The term to match."""


class NodeAffinity(ApiModel):
    """Which nodes the pods may run on, or prefer."""

    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    """Nodes the pods must run on, e.g. a GPU type label In [H100, A100]."""
    preferred_during_scheduling_ignored_during_execution: Annotated[
        list[PreferredSchedulingTerm] | None, Field(max_length=16)
    ] = None
    """Nodes the scheduler prefers, by weight."""


_KEY_LISTS = {"matchLabelKeys": "match_label_keys", "mismatchLabelKeys": "mismatch_label_keys"}
LabelKeys = Annotated[list[LabelKey] | None, Field(max_length=16)]


def _needs_selector(keys: str, attribute: str) -> Rule:
    """The rule that the list `keys` (matchLabelKeys or mismatchLabelKeys) comes with a labelSelector."""
    return Rule(
        field=keys,
        cel=f"!has(self.{keys}) || has(self.labelSelector)",
        message=f"{keys} needs labelSelector",
        reason=Reason.FORBIDDEN,
        holds=lambda t: getattr(t, attribute) is None or t.label_selector is not None,
    )


class PodAffinityTerm(RuledModel):
    """The pods that must (or must not) run in the same topology domain as this one."""

    label_selector: LabelSelector | None = None
    """The pods counted, by their labels; none when unset."""
    namespaces: Annotated[list[Namespace] | None, Field(max_length=32)] = None
    """Namespaces of the pods counted; the job's when unset and namespaceSelector is unset too."""
    namespace_selector: LabelSelector | None = None
    """Namespaces of the pods counted, by their labels; {} for every namespace."""
    topology_key: LabelKey
    """The node label whose values are the domains, e.g. kubernetes.io/hostname."""
    match_label_keys: LabelKeys = None
    """Labels of this pod whose values the counted pods must share (needs labelSelector)."""
    mismatch_label_keys: LabelKeys = None
    """Labels of this pod whose values the counted pods must not have (needs labelSelector)."""

    cross_field_rules = (
        *(_needs_selector(keys, attribute) for keys, attribute in _KEY_LISTS.items()),
        Rule(
            field="matchLabelKeys",
            cel="!has(self.matchLabelKeys) || !has(self.mismatchLabelKeys)"
            " || !self.matchLabelKeys.exists(k, k in self.mismatchLabelKeys)",
            message="a key cannot be in both matchLabelKeys and mismatchLabelKeys",
            reason=Reason.INVALID,
            holds=lambda t: not set(t.match_label_keys or []) & set(t.mismatch_label_keys or []),
        ),
    )


class WeightedPodAffinityTerm(ApiModel):
    """A pod affinity term the scheduler prefers, with its weight."""

    weight: Weight
    """1 to 100: how much a node meeting the term is preferred."""
    pod_affinity_term: PodAffinityTerm
    """The term."""


class PodAffinity(ApiModel):
    """Pods to run near (podAffinity) or away from (podAntiAffinity)."""

    required_during_scheduling_ignored_during_execution: Annotated[
        list[PodAffinityTerm] | None, Field(max_length=16)
    ] = None
    """Terms every node the pods run on must meet."""
    preferred_during_scheduling_ignored_during_execution: Annotated[
        list[WeightedPodAffinityTerm] | None, Field(max_length=16)
    ] = None
    """Terms the scheduler prefers nodes to meet, by weight."""


class Affinity(ApiModel):
    """Node and pod affinity of the role's pods, checked as Kubernetes checks a pod's."""

    node_affinity: NodeAffinity | None = None
    """Nodes the pods must or should run on, e.g. requiredDuringSchedulingIgnoredDuringExecution on a GPU type
    label."""
    pod_affinity: PodAffinity | None = None
    """Pods to run in the same topology domain as."""
    pod_anti_affinity: PodAffinity | None = None
    """Pods to keep away from, e.g. to spread workers over nodes."""
