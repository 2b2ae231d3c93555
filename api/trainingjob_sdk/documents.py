"""Untrusted request bodies to plain documents (dicts, lists, strings, numbers), refusing what could exhaust the
server or mean two things: nesting deeper than MAX_DEPTH, YAML anchors and aliases (an alias bomb expands a few
hundred bytes into gigabytes), duplicate keys, NaN and infinities, integers outside 64 bits, invalid UTF-8. YAML
is read as kubectl reads it (yaml_scalars): 1:30 and dates stay text, 1e3 is a number, y is true. The
SDK and tjctl read files through here too."""

import json
import math
from typing import Any, NoReturn

import yaml

from trainingjob_sdk import yaml_scalars

MAX_DEPTH = 64
INT64_MIN, INT64_MAX = yaml_scalars.INT64_MIN, yaml_scalars.INT64_MAX
MAX_NUMBER_TEXT = yaml_scalars.LONGEST_NUMBER


class DocumentError(ValueError):
    """The body is not an acceptable document; the message says why."""


def decode(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DocumentError(f"not valid UTF-8: byte {raw[error.start]:#04x} at offset {error.start}") from None


def parse_json(text: str) -> Any:
    try:
        document = json.loads(
            text, object_pairs_hook=_unique_keys, parse_int=_integer, parse_float=_double, parse_constant=_constant
        )
    except RecursionError:
        _too_deep()
    check_depth(document)
    return document


def parse_yaml(text: str) -> Any:
    """One YAML document (None for none); its events are checked first, so nothing is built from a bomb or a deep
    nest. Several: DocumentError saying what each is."""
    found = parse_yaml_documents(text)
    if len(found) > 1:
        raise DocumentError(f"it holds {len(found)} YAML documents ({kinds_in(found)}) where one is expected")
    return found[0] if found else None


def parse_yaml_documents(text: str) -> list[Any]:
    """Every document of a YAML stream (documents separated by ---), empty ones left out; checked as parse_yaml."""
    _check_events(text)
    loader = _Loader(text)
    try:
        found = []
        while loader.check_data():  # type: ignore[no-untyped-call]
            found.append(loader.get_data())
        return [document for document in found if document is not None]
    finally:
        loader.dispose()


def kinds_in(documents: list[Any]) -> str:
    """What each document is, for a message: 'a PersistentVolumeClaim, a TrainingJob, an object without a kind'."""
    return ", ".join(kind_of(document) for document in documents)


def kind_of(document: Any) -> str:
    """'a PersistentVolumeClaim', 'an Ingress', 'an object without a kind' or 'not an object'."""
    if not isinstance(document, dict):
        return "not an object"
    kind = document.get("kind")
    if not isinstance(kind, str) or not kind:
        return "an object without a kind"
    return f"{'an' if kind[0].upper() in 'AEIOU' else 'a'} {kind}"


def check_depth(document: Any, limit: int = MAX_DEPTH) -> None:
    """Raise unless objects and arrays nest at most `limit` deep (iteratively: no recursion to exhaust)."""
    pending: list[tuple[Any, int]] = [(document, 1)]
    while pending:
        node, depth = pending.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            continue
        if depth > limit:
            _too_deep()
        pending.extend((child, depth + 1) for child in children if isinstance(child, dict | list))


def _too_deep() -> NoReturn:
    raise DocumentError(f"objects and arrays nest more than {MAX_DEPTH} levels deep") from None


def _out_of_range(text: str) -> DocumentError:
    shown = text if len(text) <= MAX_NUMBER_TEXT else f"{text[:MAX_NUMBER_TEXT]}... ({len(text)} characters)"
    return DocumentError(f"the number {shown} is out of range (integers are 64-bit, numbers finite)")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document = dict(pairs)
    if len(document) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DocumentError(f'the key "{key[:100]}" appears twice in one object')
            seen.add(key)
    return document


def _integer(text: str) -> int:
    if len(text) > MAX_NUMBER_TEXT:
        raise _out_of_range(text)
    value = int(text)
    if not INT64_MIN <= value <= INT64_MAX:
        raise _out_of_range(text)
    return value


def _double(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _out_of_range(text)
    return value


def _constant(name: str) -> NoReturn:
    raise DocumentError(f"{name} is not a number JSON allows")


def _check_events(text: str) -> None:
    depth = 0
    for event in yaml.parse(text, Loader=yaml.CSafeLoader):
        if getattr(event, "anchor", None) is not None:  # an anchor (&name) or an alias (*name)
            raise DocumentError("YAML anchors and aliases (&name, *name) are not accepted; write the values out")
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                _too_deep()
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


class _Loader(yaml.CSafeLoader):
    """libyaml's safe loader, resolving unquoted scalars as kubectl does, refusing duplicate keys and numbers out
    of range."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is yaml.ScalarNode and implicit[0]:
            return yaml_scalars.resolve_plain(value)[0]
        return super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[str] = set()
        for key, _ in node.value:
            if isinstance(key, yaml.ScalarNode):
                if key.value in seen:
                    raise DocumentError(f'the key "{key.value[:100]}" appears twice in one mapping')
                seen.add(key.value)
        mapping = super().construct_mapping(node, deep)
        if None in mapping:
            raise DocumentError("a mapping key is null (~, null or nothing); quote it to mean the text")
        return {yaml_scalars.key_text(key): value for key, value in mapping.items()}

    def construct_number(self, node: yaml.ScalarNode) -> int | float:
        tag, value = yaml_scalars.resolve_plain(node.value)
        if tag == yaml_scalars.FLOAT and isinstance(value, float) and math.isfinite(value):
            return value
        if tag == yaml_scalars.INT and isinstance(value, int) and INT64_MIN <= value <= INT64_MAX:
            return value
        if tag not in (yaml_scalars.INT, yaml_scalars.FLOAT):  # an explicit !!int or !!float on something else
            raise DocumentError(f"{node.value[:100]!r} is not a number")
        raise _out_of_range(node.value)

    def construct_bool(self, node: yaml.ScalarNode) -> bool:
        tag, value = yaml_scalars.resolve_plain(node.value)
        if tag != yaml_scalars.BOOL:
            raise DocumentError(f"{node.value[:100]!r} is not a boolean")
        return bool(value)

    def construct_text(self, node: yaml.ScalarNode) -> str:
        return str(self.construct_scalar(node))


# As kubectl reads YAML (sigs.k8s.io/yaml): a date or time is the text written, not a timestamp object.
_Loader.add_constructor(yaml_scalars.TIMESTAMP, _Loader.construct_text)
_Loader.add_constructor(yaml_scalars.INT, _Loader.construct_number)
_Loader.add_constructor(yaml_scalars.FLOAT, _Loader.construct_number)
_Loader.add_constructor(yaml_scalars.BOOL, _Loader.construct_bool)
