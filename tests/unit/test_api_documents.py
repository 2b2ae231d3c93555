"""Parsing untrusted bodies: what is refused (and fast, before anything is built from it), and what still parses."""

import time

import pytest

from trainingjob.model.job import json_numbers
from trainingjob_sdk.documents import MAX_DEPTH, DocumentError, decode, parse_json, parse_yaml

pytestmark = pytest.mark.fast

ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + level)}: &{chr(98 + level)} [{', '.join([f'*{chr(97 + level)}'] * 10)}]\n" for level in range(8)
)


def nested_json(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


def nested_yaml_blocks(depth: int) -> str:
    return "".join(f"{'  ' * level}a:\n" for level in range(depth)) + "  " * depth + "1\n"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (nested_json(MAX_DEPTH + 1), f"nest more than {MAX_DEPTH} levels"),
        ("[" * 200_000 + "]" * 200_000, f"nest more than {MAX_DEPTH} levels"),  # past the recursion limit
        ('{"a": 1, "b": 2, "a": 3}', 'the key "a" appears twice'),
        ('{"replicas": NaN}', "NaN is not a number JSON allows"),
        ('{"replicas": -Infinity}', "-Infinity is not a number JSON allows"),
        ('{"replicas": 1e999}', "the number 1e999 is out of range"),
        ('{"replicas": 9223372036854775808}', "the number 9223372036854775808 is out of range"),
        ('{"replicas": ' + "9" * 100_000 + "}", "(100000 characters) is out of range"),
    ],
    ids=["deep", "deeper-than-recursion", "duplicate-key", "nan", "infinity", "overflow", "int64", "huge-int"],
)
def test_hostile_json_is_refused_naming_the_problem(text: str, problem: str) -> None:
    with pytest.raises(DocumentError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        parse_json(text)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (ALIAS_BOMB, "anchors and aliases"),
        ("a: &x 1\nb: 2\n", "anchors and aliases"),  # an anchor alone is refused too: nothing may refer to it
        ("base: &b {x: 1}\nderived:\n  <<: *b\n", "anchors and aliases"),  # merge keys need aliases
        ("[" * 200_000 + "]" * 200_000, f"nest more than {MAX_DEPTH} levels"),
        (nested_yaml_blocks(MAX_DEPTH + 1), f"nest more than {MAX_DEPTH} levels"),
        ("a: 1\nb: 2\na: 3\n", 'the key "a" appears twice'),
        ("replicas: .nan\n", "the number .nan is out of range"),
        ("replicas: -.inf\n", "the number -.inf is out of range"),
        ("replicas: 9223372036854775808\n", "out of range"),
        ("replicas: " + "1_" * 50_000 + "1\n", "out of range"),  # 50,001 digits: int() of it is refused or slow
        ("replicas: 0x" + "f" * 100_000 + "\n", "out of range"),
    ],
    ids=[
        "bomb",
        "anchor",
        "merge",
        "deep-flow",
        "deep-blocks",
        "duplicate-key",
        "nan",
        "infinity",
        "int64",
        "digits",
        "hex",
    ],
)
def test_hostile_yaml_is_refused_before_it_is_built(text: str, problem: str) -> None:
    start = time.perf_counter()
    with pytest.raises(DocumentError, match=problem):
        parse_yaml(text)
    assert time.perf_counter() - start < 0.5


def test_invalid_utf8_is_refused_naming_the_byte() -> None:
    with pytest.raises(DocumentError, match="not valid UTF-8: byte 0xff at offset 9"):
        decode(b'{"name": \xff}')


def test_ordinary_documents_still_parse() -> None:
    as_yaml = "kind: TrainingJob\nspec:\n  workers: {replicas: 2}\n  steps: [1, 2.5, -9223372036854775808]\n"
    expected = {"kind": "TrainingJob", "spec": {"workers": {"replicas": 2}, "steps": [1, 2.5, -(1 << 63)]}}
    assert parse_yaml(as_yaml) == expected
    assert parse_json('{"kind": "TrainingJob", "spec": {"workers": {"replicas": 2}, "steps": [1, 2.5, '
                      '-9223372036854775808]}}') == expected  # fmt: skip
    assert parse_json(nested_json(MAX_DEPTH - 1)) is not None
    assert parse_yaml(nested_yaml_blocks(MAX_DEPTH - 1)) is not None
    assert parse_yaml("note: ünïcödé ✓\n") == {"note": "ünïcödé ✓"}
    with pytest.raises(DocumentError, match=r"2 YAML documents \(an object without a kind, a TrainingJob\) where"):
        parse_yaml("a: 1\n---\nkind: TrainingJob\n")  # still one document only


@pytest.mark.parametrize(
    ("text", "value"),
    [
        pytest.param("value: 2026-11-22\n", "2026-11-22", id="date"),
        pytest.param("value: 2026-11-22T10:00:00Z\n", "2026-11-22T10:00:00Z", id="timestamp"),
        pytest.param("value: '0755'\n", "0755", id="quoted"),
        pytest.param("value: yes\n", True, id="yaml-1.1-boolean"),
    ],
)
def test_yaml_is_read_as_kubectl_reads_it(text: str, value: object) -> None:
    """kubectl (sigs.k8s.io/yaml) sends a date as the text written; PyYAML's safe_load makes it a date object,
    which the model then refuses as not a string: the same file meant two things."""
    assert parse_yaml(text) == {"value": value}


# What kubectl apply (v1.32, sigs.k8s.io/yaml) made of each unquoted scalar, as stored by kube-apiserver v1.34 in a
# field that keeps any value (spec.trainer.config): measured with kubectl apply --dry-run=server -o json.
KUBECTL_READS = [
    ("1e3", 1000),
    ("1.5e3", 1500),
    ("1e-3", 0.001),
    ("1e21", 1e21),
    (".5e1", 5),
    ("-.5", -0.5),
    ("2.0", 2),
    ("1:30", "1:30"),
    ("1:30.5", "1:30.5"),
    ("0o17", 15),
    ("0O17", 15),
    ("017", 15),
    ("08", 8),
    ("0x_1F", 31),
    ("-0b11", -3),
    ("1_000", 1000),
    ("1_0.5", 10.5),
    ("_1", "_1"),
    ("1e", "1e"),
    (".e1", ".e1"),
    ("+-1", "+-1"),
    ("y", True),
    ("Y", True),
    ("n", False),
    ("Off", False),
    ("tRue", "tRue"),
]


@pytest.mark.parametrize(("written", "stored"), KUBECTL_READS, ids=[written for written, _ in KUBECTL_READS])
def test_a_plain_scalar_means_what_it_means_to_kubectl(written: str, stored: object) -> None:
    """PyYAML (YAML 1.1) read 1:30 as 90, and 1e3, 0o17 and y as text: local mode and the cluster disagreed."""
    value = json_numbers(parse_yaml(f"value: {written}\n"))["value"]
    assert (value, type(value)) == (stored, type(stored))


def test_mapping_keys_are_written_as_kubectl_writes_them() -> None:
    document = parse_yaml("{y: 1, 1e3: 2, 0.5: 3, 1:30: 4, 017: 5, 1e21: 6, 1.5e-7: 7, 2.0: 8}\n")
    assert list(document) == ["true", "1000", "0.5", "1:30", "15", "1e+21", "1.5e-07", "2"]
    with pytest.raises(DocumentError, match="a mapping key is null"):
        parse_yaml("~: 1\n")
