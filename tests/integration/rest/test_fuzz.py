"""Hostile input to the REST API: a table of bodies built to exhaust or confuse it (each refused fast, naming the
problem, without the server's memory growing), then schemathesis over every operation: no input answers 5xx."""

import contextlib
import http.client
import json
import resource
import socket
import time
from typing import Any
from urllib.parse import urlsplit

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from tests.support.rest_api import TIMEOUT, World, jobs_path, manifest

from trainingjob_sdk.rest import SAME_SITE

pytestmark = pytest.mark.envtest

EXAMPLES_PER_OPERATION = 25
# Streams never end by themselves; their behaviour is tested in test_observe.py and test_jobs.py.
STREAMS = ("/watch", "/logs")
JSON, YAML = "application/json", "application/yaml"
LIMIT = 1 << 20  # the API's body limit
# CPU seconds of this process (the server runs in it), not wall time: the work a refusal costs, which stays the same
# however busy the machine is; a body that got expanded or walked would cost far more.
FAST = 1.0
MEMORY = 64 << 20  # bytes: the most the server's peak memory may grow by while refusing one of them
# Nine levels of ten aliases each: 10^9 strings once expanded, from 700 bytes.
ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + n)}: &{chr(98 + n)} [{', '.join([f'*{chr(97 + n)}'] * 10)}]\n" for n in range(8)
)


def with_field(path: str, value: str) -> bytes:
    """A valid manifest as JSON text, with the raw JSON text `value` at `path` (dotted)."""
    document = manifest("hostile")
    *parents, leaf = path.split(".")
    parent = document
    for key in parents:
        parent = parent.setdefault(key, {})
    parent[leaf] = "__VALUE__"
    return json.dumps(document).replace('"__VALUE__"', value).encode()


def nested_yaml_blocks(depth: int) -> bytes:
    return ("".join(f"{' ' * level}a:\n" for level in range(depth)) + " " * depth + "1\n").encode()


HOSTILE: list[tuple[str, str, bytes, int, str]] = [
    ("yaml-alias-bomb", YAML, ALIAS_BOMB.encode(), 400, "YAML anchors and aliases (&name, *name) are not accepted"),
    ("json-deep", JSON, b"[" * 500_000 + b"]" * 500_000, 400, "nest more than 64 levels deep"),
    ("json-deep-in-a-manifest", JSON, with_field("metadata.x", "[" * 100 + "]" * 100), 400, "nest more than 64"),
    ("yaml-deep-flow", YAML, b"[" * 500_000 + b"]" * 500_000, 400, "nest more than 64 levels deep"),
    ("yaml-deep-blocks", YAML, nested_yaml_blocks(1000), 400, "nest more than 64 levels deep"),
    ("json-huge-integer", JSON, with_field("spec.workers.replicas", "9" * 100_000), 400, "is out of range"),
    ("json-huge-exponent", JSON, with_field("spec.workers.replicas", "1e999"), 400, "1e999 is out of range"),
    ("json-nan", JSON, with_field("spec.workers.replicas", "NaN"), 400, "NaN is not a number JSON allows"),
    ("json-infinity", JSON, with_field("spec.workers.replicas", "Infinity"), 400, "Infinity is not a number"),
    ("yaml-huge-integer", YAML, b"spec: {workers: {replicas: " + b"9" * 100_000 + b"}}", 400, "is out of range"),
    ("yaml-base60-is-text", YAML, b"spec: " + b"1:" * 300_000 + b"1", 422, "spec"),  # as kubectl reads it
    ("yaml-nan", YAML, b"spec: {workers: {replicas: .nan}}", 400, ".nan is out of range"),
    ("json-duplicate-key", JSON, b'{"kind": "TrainingJob", "kind": "Pod"}', 400, 'the key "kind" appears twice'),
    ("yaml-duplicate-key", YAML, b"kind: TrainingJob\nkind: Pod\n", 400, 'the key "kind" appears twice'),
    ("json-invalid-utf8", JSON, b'{"kind": "\xc3\x28"}', 400, "not valid UTF-8: byte 0xc3 at offset 10"),
    ("yaml-invalid-utf8", YAML, b"kind: \xff\xfe\n", 400, "not valid UTF-8: byte 0xff at offset 6"),
    ("yaml-python-tag", YAML, b"!!python/object/apply:os.system [id]", 400, "could not determine a constructor"),
    ("json-not-an-object", JSON, b"[1, 2]", 422, "the manifest must be an object"),
    ("yaml-not-an-object", YAML, b"just a string", 422, "the manifest must be an object"),
    ("json-very-long-name", JSON, with_field("metadata.name", json.dumps("a" * 200_000)), 422, "metadata.name"),
    ("other-media-type", "text/plain", b"kind: TrainingJob", 415, "application/json or application/yaml"),
]


def peak_memory() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # the server runs in this process


@pytest.mark.parametrize(
    ("media_type", "body", "status", "problem"), [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE]
)
def test_hostile_bodies_are_refused_fast_naming_the_problem(
    world: World,
    media_type: str,
    body: bytes,
    status: int,
    problem: str,
) -> None:
    world.writer.get("/healthz")  # the connection is up before the clock starts
    before, start = peak_memory(), time.process_time()
    response = world.writer.post(jobs_path(world.home), content=body, headers={"Content-Type": media_type})
    spent = time.process_time() - start
    assert response.status_code == status, response.text[:500]
    assert problem in response.json()["message"], response.text[:500]
    assert spent < FAST, f"{spent:.2f} CPU seconds"
    assert peak_memory() - before < MEMORY, f"peak memory grew by {(peak_memory() - before) >> 20} MiB"


def exchange(api: World, head: dict[str, str], body: bytes) -> tuple[int, dict[str, Any]]:
    """POST a job with raw `head` and `body` bytes, as a client that is free to lie; the status and JSON answer."""
    url = urlsplit(str(api.writer.base_url))
    auth = {"Authorization": api.writer.headers["Authorization"], **SAME_SITE}
    head = {"Host": url.netloc, "Content-Type": JSON, **auth, **head}
    request = f"POST {jobs_path(api.home)} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in head.items())
    # TIMEOUT, not FAST: FAST bounds the CPU a refusal costs; a socket's timeout is wall time, which a loaded machine
    # stretches (the server runs in this process and asks Kubernetes who the caller is before it answers). A server
    # that never answers still fails the test, at TIMEOUT.
    with socket.create_connection((str(url.hostname), int(url.port or 80)), timeout=TIMEOUT) as sock:
        # A server that refuses a body part-way may hang up before it has read the rest of it (uvicorn closes an
        # idle keep-alive connection): the rest of the send then meets a reset. Its answer is already here to read.
        with contextlib.suppress(ConnectionResetError, BrokenPipeError):
            sock.sendall(request.encode() + b"\r\n" + body)
        response = http.client.HTTPResponse(sock)
        response.begin()
        return response.status, json.loads(response.read())


def test_a_body_declared_too_large_is_refused_before_it_is_sent(world: World) -> None:
    status, answer = exchange(world, {"Content-Length": str(10 << 30)}, b"")  # 10 GiB announced, none sent
    assert (status, answer["message"]) == (413, f"the manifest is larger than {LIMIT} bytes")


def test_a_body_without_length_is_refused_as_soon_as_it_passes_the_limit(world: World) -> None:
    chunk = b"x" * (64 << 10)
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(LIMIT // len(chunk) + 1))
    status, answer = exchange(world, {"Transfer-Encoding": "chunked"}, chunks)  # the body never ends
    assert (status, answer["message"]) == (413, f"the manifest is larger than {LIMIT} bytes")


def test_no_input_makes_the_api_fail(world: World) -> None:
    document = world.writer.get("/openapi.json").json()
    schema = schemathesis.openapi.from_dict(document)
    operations = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]
    operations = [operation for operation in operations if not operation.path.endswith(STREAMS)]
    assert len(operations) >= 9
    token = world.writer.headers["Authorization"]
    for operation in operations:
        check(operation, str(world.writer.base_url).rstrip("/"), token)


def check(operation: Any, base_url: str, token: str) -> None:
    @given(case=operation.as_strategy(), authorized=st.booleans())
    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    def run(case: Any, authorized: bool) -> None:
        headers = ({"Authorization": token} if authorized else {}) | SAME_SITE  # the writes reach their routes
        case.call_and_validate(base_url=base_url, headers=headers, checks=[not_a_server_error], timeout=10)

    run()
