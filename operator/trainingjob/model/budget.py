"""Size budgets: the largest TrainingJob (and sweep template) every entry point accepts.

Two bounds, so that a few hundred large jobs cannot fill the memory of the operator and the REST API, which keep
every job:

- A role's text: the command, args and environment (names and values) of its trainer, init containers and
  sidecars, and its pods' annotations (keys and values), at most ROLE_TEXT_MAX characters together. A CEL rule
  in the CRD and the same sum in the model: the apiserver and every other entry point judge it alike.
- A role's items: the command and args entries, environment variables, envFrom sources and volume mounts of its
  trainer, init containers and sidecars, at most ROLE_ITEMS_MAX together: each is an object or string of its own
  once parsed, and small ones cost the memory, not the bytes (a CEL rule and the model alike too).
- The whole spec: at most SPEC_MAX_BYTES as compact JSON (UTF-8), what the model checks (local mode, tjctl, the
  SDK, the REST API). CEL cannot serialize an object, so the apiserver bounds the spec only field by field and by
  the text rule; a job it stores over this budget fails (InvalidSpec) naming its largest part.
"""

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from trainingjob.model.rules import Reason, Rule

ROLE_TEXT_MAX = 64 * 1024
ROLE_ITEMS_MAX = 512
SPEC_MAX_BYTES = 128 * 1024
ROLE_TEXT_MESSAGE = (
    f"the role's command, args, env (names and values) of every container and its pods' annotations take more than"
    f" {ROLE_TEXT_MAX} characters together: put long scripts and settings in a ConfigMap or the image"
)
ROLE_ITEMS_MESSAGE = (
    f"the role's containers have more than {ROLE_ITEMS_MAX} command and args entries, env variables, envFrom sources"
    " and volume mounts together"
)
_CONTAINER_LISTS = ("initContainers", "sidecars")
_ITEM_LISTS = ("command", "args", "env", "envFrom", "volumeMounts")


def _strings_cel(path: str) -> str:
    return f"(has({path}) ? {path}.map(a, a.size()).sum() : 0)"


def _env_cel(path: str) -> str:
    return f"(has({path}) ? {path}.map(e, e.name.size() + (has(e.value) ? e.value.size() : 0)).sum() : 0)"


def _container_cel(item: str) -> str:
    """CEL: the text of one container `item` (command, args, env)."""
    return " + ".join((_strings_cel(f"{item}.command"), _strings_cel(f"{item}.args"), _env_cel(f"{item}.env")))


def role_text_cel() -> str:
    """CEL over a role (self): its text, as role_text counts it, within ROLE_TEXT_MAX."""
    parts = _containers_cel(_container_cel)
    annotations = "self.podMetadata.annotations"
    parts.append(
        f"(has(self.podMetadata) && has({annotations})"
        f" ? {annotations}.map(k, k.size() + {annotations}[k].size()).sum() : 0)"
    )
    return f"{' + '.join(parts)} <= {ROLE_TEXT_MAX}"


def _containers_cel(per_container: Callable[[str], str]) -> list[str]:
    """CEL terms: `per_container` of the role (self) and of each of its init containers and sidecars."""
    terms = [per_container("self")]
    terms += [f"(has(self.{kind}) ? self.{kind}.map(c, {per_container('c')}).sum() : 0)" for kind in _CONTAINER_LISTS]
    return terms


def _items_cel(item: str) -> str:
    return " + ".join(f"(has({item}.{name}) ? {item}.{name}.size() : 0)" for name in _ITEM_LISTS)


def role_items_cel() -> str:
    """CEL over a role (self): its items, as role_items counts them, within ROLE_ITEMS_MAX."""
    return f"{' + '.join(_containers_cel(_items_cel))} <= {ROLE_ITEMS_MAX}"


def _containers(role: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [role, *(c for kind in _CONTAINER_LISTS for c in role.get(kind) or [])]


def role_items(role: Mapping[str, Any]) -> int:
    """The items of a role (its wire form): what ROLE_ITEMS_MAX bounds."""
    return sum(len(container.get(name) or []) for container in _containers(role) for name in _ITEM_LISTS)


def _container_text(container: Mapping[str, Any]) -> int:
    strings = [*(container.get("command") or []), *(container.get("args") or [])]
    env = [(e.get("name") or "") + (e.get("value") or "") for e in container.get("env") or []]
    return sum(len(text) for text in (*strings, *env))


def role_text(role: Mapping[str, Any]) -> int:
    """The characters of a role's text (its wire form, camelCase): what ROLE_TEXT_MAX bounds."""
    containers = _containers(role)
    annotations = (role.get("podMetadata") or {}).get("annotations") or {}
    return sum(map(_container_text, containers)) + sum(len(k) + len(v) for k, v in annotations.items())


def _within(count: Callable[[Mapping[str, Any]], int], limit: int) -> Callable[[BaseModel], bool]:
    return lambda role: count(role.model_dump(by_alias=True, exclude_none=True)) <= limit


def role_rules() -> tuple[Rule, ...]:
    """The two budgets of a role, as rules over the role itself (the apiserver names the role)."""
    budgets = (
        (role_text_cel(), ROLE_TEXT_MESSAGE, role_text, ROLE_TEXT_MAX),
        (role_items_cel(), ROLE_ITEMS_MESSAGE, role_items, ROLE_ITEMS_MAX),
    )
    return tuple(
        Rule(field="", cel=cel, message=message, reason=Reason.INVALID, holds=_within(count, limit))
        for cel, message, count, limit in budgets
    )


def json_size(value: Any) -> int:
    """Bytes of `value` as compact JSON in UTF-8, as the apiserver stores it."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def _parts(spec: Mapping[str, Any]) -> Iterable[tuple[tuple[str, ...], int]]:
    """Every field of the spec and of its roles, with its size (a role's fields instead of the role)."""
    for key, value in spec.items():
        if isinstance(value, Mapping) and key in ("workers", "parameterServers"):
            yield from (((key, inner), json_size(part)) for inner, part in value.items())
        else:
            yield (key,), json_size(value)


def check_spec_size(spec: Mapping[str, Any], model: str) -> None:
    """Refuse a spec (its wire form) over SPEC_MAX_BYTES, naming its largest part."""
    size = json_size(spec)
    if size <= SPEC_MAX_BYTES:
        return
    where, largest = max(_parts(spec), key=lambda part: part[1])
    message = (
        f"the spec takes {size} bytes as JSON, more than the {SPEC_MAX_BYTES} a TrainingJob may have; its largest"
        f" part is spec.{'.'.join(where)} ({largest} bytes): put large settings in a ConfigMap or the image"
    )
    error = InitErrorDetails(type=PydanticCustomError("too_large", message), loc=where, input=size)
    raise ValidationError.from_exception_data(model, [error])
