"""What an unquoted YAML scalar means, decided as kubectl decides it, so that a manifest means one thing in local
mode, the REST API and the cluster. kubectl reads YAML with sigs.k8s.io/yaml (go-yaml v2) and sends JSON, which
the apiserver reads again; PyYAML's YAML 1.1 rules differ from that on the numbers people write:

    written    kubectl / the apiserver    PyYAML
    1:30       the text "1:30"            90 (base 60)
    1e3        1000                       the text "1e3"
    1e-3       0.001                      the text "1e-3"
    0o17       15                         the text "0o17"
    y, n       true, false                the texts "y", "n"

`resolve_plain` is the first column. (kubectl also sends 2.0 as 2: TrainingJob.from_manifest reads a whole float
as the integer, whoever wrote it.)"""

import re
from decimal import Decimal
from typing import Any

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
LONGEST_NUMBER = 32  # no 64-bit integer or double needs more characters
NULL, BOOL, INT, FLOAT, STR, TIMESTAMP = (
    f"tag:yaml.org,2002:{name}" for name in ("null", "bool", "int", "float", "str", "timestamp")
)

_WORDS: dict[str, tuple[str, Any]] = {
    **dict.fromkeys(("", "~", "null", "Null", "NULL"), (NULL, None)),
    **dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "on", "On", "ON", "true", "True", "TRUE"), (BOOL, True)),
    **dict.fromkeys(("n", "N", "no", "No", "NO", "off", "Off", "OFF", "false", "False", "FALSE"), (BOOL, False)),
    **{word: (FLOAT, float("nan")) for word in (".nan", ".NaN", ".NAN")},
    **{
        f"{sign}{word}": (FLOAT, float(f"{sign or '+'}inf"))
        for sign in ("", "+", "-")
        for word in (".inf", ".Inf", ".INF")
    },
}
# Go's strconv.ParseInt with base 0 (after go-yaml removed every '_'): a sign, then 0x, 0o, 0b, a leading 0 (octal)
# or decimal digits.
_GO_INT = re.compile(r"[-+]?(0[xX][0-9a-fA-F]+|0[oO]?[0-7]*|0[bB][01]+|[1-9][0-9]*)")
_GO_BASES = {"x": 16, "o": 8, "b": 2}
# go-yaml v2's yamlStyleFloat, and Go's ParseFloat for a scalar starting with '.'.
_YAML_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_DOT_FLOAT = re.compile(r"\.[0-9]+([eE][-+]?[0-9]+)?")
_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt ].*)?")  # text to sigs.k8s.io/yaml: PyYAML's resolver


def _go_int(text: str) -> int:
    sign = -1 if text.startswith("-") else 1
    digits = text.lstrip("+-")
    if len(digits) > 1 and digits[0] == "0":
        prefix = digits[1].lower()
        base = _GO_BASES.get(prefix, 8)
        return sign * int(digits[2:] if prefix in _GO_BASES else digits[1:], base)
    return sign * int(digits)


def resolve_plain(text: str) -> tuple[str, Any]:
    """The tag and value of an unquoted scalar as go-yaml v2 resolves it. Numbers outside 64 bits are left to the
    caller: the value is then the Python int or float, or None for a number longer than LONGEST_NUMBER
    characters (none within 64 bits is; the work of reading one grows with its length)."""
    if text in _WORDS:
        return _WORDS[text]
    if not text or text[0] not in "+-.0123456789" or _TIMESTAMP.fullmatch(text):
        return STR, text
    if text[0] == ".":
        return (
            (FLOAT, float(text) if len(text) <= LONGEST_NUMBER else None) if _DOT_FLOAT.fullmatch(text) else (STR, text)
        )
    plain = text.replace("_", "")
    if _GO_INT.fullmatch(plain) and not re.fullmatch(r"[-+]?0[oO]", plain):
        return INT, _go_int(plain) if len(text) <= LONGEST_NUMBER else None
    if _YAML_FLOAT.fullmatch(plain):
        return FLOAT, float(plain) if len(text) <= LONGEST_NUMBER else None
    return STR, text


def key_text(key: Any) -> str:
    """A mapping key as sigs.k8s.io/yaml writes it into JSON: true, 15, 1000, 1e+21 (Go's shortest %g)."""
    if isinstance(key, bool):
        return "true" if key else "false"
    if not isinstance(key, float):
        return str(key)
    number = Decimal(repr(key)).normalize()
    sign, digits, exponent = number.as_tuple()
    assert isinstance(exponent, int)  # finite: the loader refuses NaN and infinities first
    places = len(digits) + exponent - 1  # the power of ten of the first digit
    if -4 <= places < 6:
        return f"{number:f}"
    text = "".join(map(str, digits))
    mantissa = text[0] + (f".{text[1:]}" if len(text) > 1 else "")
    return f"{'-' * sign}{mantissa}e{'-' if places < 0 else '+'}{abs(places):02d}"
