"""Kubernetes label selectors (=, ==, !=, in, notin, exists, !exists), parsed once and matched in memory."""

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from trainingjob.model.base import LABEL_VALUE, QUALIFIED_NAME

_SET_TERM = re.compile(r"^(?P<key>[^\s!=()]+)\s+(?P<op>in|notin)\s+\((?P<values>[^()]*)\)$")
_EQUALITY_TERM = re.compile(r"^(?P<key>[^\s!=()]+)\s*(?P<op>==|=|!=)\s*(?P<value>[^\s!=(),]*)$")


class Operator(StrEnum):
    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!exists"


class SelectorError(ValueError):
    """A label selector that is not well formed."""


@dataclass(frozen=True)
class Requirement:
    """One term of a selector: key, operator and values."""

    key: str
    operator: Operator
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == Operator.EXISTS:
            return self.key in labels
        if self.operator == Operator.DOES_NOT_EXIST:
            return self.key not in labels
        if self.operator == Operator.IN:
            return labels.get(self.key) in self.values
        return labels.get(self.key) not in self.values


@dataclass(frozen=True)
class Selector:
    """All requirements must hold; the empty selector matches everything."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        return all(r.matches(labels or {}) for r in self.requirements)


def parse(text: str | None) -> Selector:
    """The selector written as in `kubectl get -l`, e.g. "team=nlp,tier in (a,b),!legacy"."""
    if not text or not text.strip():
        return Selector()
    return Selector(tuple(_term(term.strip()) for term in _split(text)))


def _split(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    terms, depth, current = [], 0, ""
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += char
    return [*terms, current]


def _term(term: str) -> Requirement:
    if match := _SET_TERM.match(term):
        values = frozenset(_value(v.strip()) for v in match["values"].split(","))
        return Requirement(_key(match["key"]), Operator(match["op"]), values)
    if match := _EQUALITY_TERM.match(term):
        operator = Operator.NOT_IN if match["op"] == "!=" else Operator.IN
        return Requirement(_key(match["key"]), operator, frozenset({_value(match["value"])}))
    if term.startswith("!"):
        return Requirement(_key(term[1:].strip()), Operator.DOES_NOT_EXIST)
    return Requirement(_key(term), Operator.EXISTS)


def _key(key: str) -> str:
    if len(key) > 316 or not re.fullmatch(QUALIFIED_NAME, key):
        raise SelectorError(f"{key!r} is not a valid label key")
    return key


def _value(value: str) -> str:
    if len(value) > 63 or not re.fullmatch(LABEL_VALUE, value):
        raise SelectorError(f"{value!r} is not a valid label value")
    return value
