"""Cross-field and transition rules, each written once as CEL (for the apiserver) and in Python (pydantic)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, GetJsonSchemaHandler, ValidationError
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import InitErrorDetails, PydanticCustomError, core_schema

VALIDATIONS = "x-kubernetes-validations"


class Reason(StrEnum):
    """The apiserver's reason for a failed CEL rule, which decides the wording of its error."""

    REQUIRED = "FieldValueRequired"
    FORBIDDEN = "FieldValueForbidden"
    INVALID = "FieldValueInvalid"


@dataclass(frozen=True)
class Rule:
    """A rule over one object: `cel` for the CRD, `holds` for pydantic; both report on `field`."""

    field: str  # wire path relative to the object, e.g. "trainer.stalenessBound"; "" for the object itself
    cel: str
    message: str
    reason: Reason
    holds: Callable[[Any], bool]

    def to_cel(self) -> dict[str, str]:
        rule = {"rule": self.cel, "message": self.message, "reason": self.reason.value}
        # The apiserver takes fieldPath only below spec and status; metadata rules name the field in message.
        whole = not self.field or self.field.startswith("metadata.")
        return rule if whole else {**rule, "fieldPath": f".{self.field}"}

    def to_error(self, model: BaseModel) -> InitErrorDetails:
        return InitErrorDetails(
            type=PydanticCustomError(_error_type(self.reason), self.message),
            loc=tuple(self.field.split(".")) if self.field else (),
            input=_value_at(model, self.field),
        )


def _error_type(reason: Reason) -> str:
    return {Reason.REQUIRED: "field_required", Reason.FORBIDDEN: "field_forbidden"}.get(reason, "field_invalid")


def _value_at(model: BaseModel, wire_path: str) -> Any:
    value: Any = model.model_dump(by_alias=True, exclude_none=True)
    for key in wire_path.split(".") if wire_path else ():
        value = value.get(key) if isinstance(value, dict) else None
    return value


def check_rules(model: BaseModel, rules: tuple[Rule, ...]) -> None:
    """Raise one ValidationError naming every field whose rule does not hold."""
    broken = [rule.to_error(model) for rule in rules if not rule.holds(model)]
    if broken:
        raise ValidationError.from_exception_data(type(model).__name__, broken)


@dataclass(frozen=True)
class Immutable:
    """Marks a field that must not change once the job exists: `self == oldSelf` in the CRD."""

    name: str  # the field's wire name, for messages; the apiserver adds the full path
    kind: str = "TrainingJob"

    @property
    def message(self) -> str:
        return f"{self.name} is immutable: delete and recreate the {self.kind} to change it"

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        json_schema = dict(handler(schema))
        rule = {"rule": "self == oldSelf", "message": self.message}
        json_schema[VALIDATIONS] = [*json_schema.get(VALIDATIONS, []), rule]
        return json_schema


@dataclass(frozen=True)
class FixedPresence:
    """Marks an optional field that must not be added or removed once the job exists; its content may change
    where its own fields allow."""

    name: str


def immutable_marker(model_type: type[BaseModel], field_name: str) -> Immutable | FixedPresence | None:
    markers = model_type.model_fields[field_name].metadata
    return next((m for m in markers if isinstance(m, Immutable | FixedPresence)), None)


def presence_rules(model_type: type[BaseModel]) -> list[dict[str, str]]:
    """CEL transition rules that keep optional immutable fields from being added or removed."""
    found = []
    for name, field in model_type.model_fields.items():
        marker = immutable_marker(model_type, name)
        if marker is not None and not field.is_required() and field.default is None:
            wire = field.alias or name
            found.append(
                {
                    "rule": f"has(self.{wire}) == has(oldSelf.{wire})",
                    "message": f"{marker.name} cannot be added or removed once the job is created",
                    "fieldPath": f".{wire}",
                    "reason": Reason.FORBIDDEN.value,
                }
            )
    return found


def changed_immutable_fields(old: BaseModel, new: BaseModel, prefix: str = "") -> list[str]:
    """The wire paths of immutable fields that differ between `old` and `new` (the CRD's transition rules)."""
    return list(_changed(old, new, prefix))


def _changed(old: BaseModel, new: BaseModel, prefix: str) -> Iterator[str]:
    model_type = type(new)
    for name, field in model_type.model_fields.items():
        old_value, new_value = getattr(old, name), getattr(new, name)
        path = f"{prefix}{field.alias or name}"
        marker = immutable_marker(model_type, name)
        if isinstance(marker, Immutable):
            if old_value != new_value:
                yield path
        elif isinstance(marker, FixedPresence) and (old_value is None) != (new_value is None):
            yield path
        elif isinstance(old_value, BaseModel) and isinstance(new_value, BaseModel):
            yield from _changed(old_value, new_value, f"{path}.")
