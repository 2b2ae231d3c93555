"""The base of every TrainingJob API model and the small value types they share."""

import re
from collections import Counter
from collections.abc import Callable
from decimal import Decimal
from typing import Annotated, Any, ClassVar, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.json_schema import WithJsonSchema

from trainingjob.model import rules

# Kubernetes name formats, as its apimachinery validation spells them.
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
DNS_SUBDOMAIN = rf"^{_SUBDOMAIN}$"
# A label key: an optional DNS-subdomain prefix and a name of at most 63 characters.
QUALIFIED_NAME = rf"^({_SUBDOMAIN}/)?[A-Za-z0-9]([-A-Za-z0-9_.]{{0,61}}[A-Za-z0-9])?$"
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
# A non-negative resource.Quantity: a decimal number with an optional SI, binary or exponent suffix.
QUANTITY = (
    r"^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
QUANTITY_MAX_LENGTH = 64
_SUFFIXES = {
    **{s: Decimal(1024) ** (i + 1) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))},
    **{s: Decimal(1000) ** (i + 1) for i, s in enumerate("kMGTPE")},
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
}


def _camel(name: str) -> str:
    return to_camel(name)


def _add_cel_rules(schema: dict[str, Any], model_type: type[Any]) -> None:
    validations = [rule.to_cel() for rule in getattr(model_type, "cross_field_rules", ())]
    validations += rules.presence_rules(model_type)
    if validations:
        schema[rules.VALIDATIONS] = [*schema.get(rules.VALIDATIONS, []), *validations]


class ApiModel(BaseModel):
    """camelCase on the wire, snake_case in Python, unknown fields refused."""

    model_config = ConfigDict(
        alias_generator=_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="forbid",
        use_attribute_docstrings=True,
        json_schema_extra=_add_cel_rules,
    )


class RuledModel(ApiModel):
    """An ApiModel with cross-field rules, checked once its fields are. Only these models run a Python check after
    validation: a status, read on every pass, has none (and a model that declares rules without this base is refused
    by pydantic as an unannotated attribute)."""

    cross_field_rules: ClassVar[tuple[rules.Rule, ...]] = ()

    @model_validator(mode="after")
    def _check_cross_field_rules(self) -> Self:
        rules.check_rules(self, self.cross_field_rules)
        return self


def parse_quantity(text: str | int) -> Decimal:
    """The value of a Kubernetes quantity such as "500m", "16Gi" or 2."""
    text = str(text).lstrip("+")
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if suffix and text.endswith(suffix) and not text.endswith(("e" + suffix, "E" + suffix)):
            return Decimal(text.removesuffix(suffix)) * _SUFFIXES[suffix]
    return Decimal(text)


def _check_quantity(value: int | str) -> int | str:
    if isinstance(value, int) and value < 0:
        raise ValueError("a quantity must not be negative")
    if isinstance(value, str) and (len(value) > QUANTITY_MAX_LENGTH or not re.fullmatch(QUANTITY, value)):
        raise ValueError(f"{value!r} is not a quantity such as 500m, 2, 1.5 or 16Gi")
    return value


def unique_by(key: str) -> Callable[[list[Any]], list[Any]]:
    """A validator refusing two list items with the same `key`, like x-kubernetes-list-type: map."""

    def check(items: list[Any]) -> list[Any]:
        seen = Counter(getattr(item, key) for item in items)
        duplicates = sorted(value for value, count in seen.items() if count > 1)
        if duplicates:
            raise ValueError(f"duplicate {key}: {', '.join(map(str, duplicates))}")
        return items

    return check


def unique_values(items: list[Any]) -> list[Any]:
    """A validator refusing repeated items, like x-kubernetes-list-type: set."""
    if len(set(items)) != len(items):
        raise ValueError("items must be unique")
    return items


def list_map(*keys: str) -> dict[str, Any]:
    """The CRD markers of a list whose items are identified by `keys`."""
    return {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": list(keys)}


LIST_SET: dict[str, Any] = {"x-kubernetes-list-type": "set"}
# A list written whole by its one writer (the operator's status bookkeeping): the apiserver's managed fields then
# hold one entry for the list, not one per item keyed by its identity (87-144 bytes a tracked pod, about the item's
# own size).
LIST_ATOMIC: dict[str, Any] = {"x-kubernetes-list-type": "atomic"}
Int = StrictInt
Float = StrictFloat
Bool = StrictBool
Str = StrictStr
ShortStr = Annotated[StrictStr, Field(max_length=253)]
LongStr = Annotated[StrictStr, Field(max_length=4096)]


def int_or_string(**constraints: Any) -> WithJsonSchema:
    """The CRD schema of an int-or-string field; `constraints` (minimum, pattern...) each bind the kind they fit."""
    return WithJsonSchema(
        {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}], **constraints}
    )


Quantity = Annotated[
    StrictInt | StrictStr,
    AfterValidator(_check_quantity),
    int_or_string(pattern=QUANTITY, maxLength=QUANTITY_MAX_LENGTH, minimum=0),
]
