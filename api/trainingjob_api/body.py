"""Reading a job manifest from a request body: JSON or YAML, size-limited while it streams in, parsed by
trainingjob_sdk.documents (off the event loop) and checked for creation by trainingjob_sdk.manifests.to_create: the
one TrainingJob model, and a metadata.name or metadata.generateName."""

from collections.abc import Callable
from typing import Any, TypeVar

import yaml
from fastapi import Request
from starlette.concurrency import run_in_threadpool

from trainingjob.model import TrainingJob
from trainingjob.model.sweep import TrainingSweep
from trainingjob_api.problems import ApiError
from trainingjob_api.writes import ACCEPTED, YAML_TYPES, media_type
from trainingjob_sdk.documents import DocumentError, decode, parse_json, parse_yaml
from trainingjob_sdk.manifests import to_create
from trainingjob_sdk.sweeps import to_create as sweep_to_create

T = TypeVar("T")
MAX_BODY_BYTES = 1 << 20


def manifest_body(kind: str) -> dict[str, Any]:
    """The OpenAPI request body of a create: a `kind` manifest as JSON or YAML."""
    return {
        "requestBody": {
            "required": True,
            "description": f"A {kind} manifest, the same one `kubectl apply` takes, as JSON or YAML (at most 1 MiB; "
            "no YAML anchors or aliases, no duplicate keys, nested at most 64 deep).",
            "content": {
                media_type: {"schema": {"$ref": f"#/components/schemas/{kind}"}}
                for media_type in ("application/json", "application/yaml")
            },
        }
    }


MANIFEST_BODY = manifest_body("TrainingJob")


def _too_large() -> ApiError:
    return ApiError(413, "RequestEntityTooLarge", f"the manifest is larger than {MAX_BODY_BYTES} bytes")


async def read_body(request: Request, limit: int = MAX_BODY_BYTES) -> bytes:
    """The body, refused (413) on a Content-Length over `limit` before reading, or as soon as `limit` is passed."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or len(declared) > 19):
        raise ApiError(400, "BadRequest", "Content-Length: not a number of bytes")
    if declared is not None and int(declared) > limit:
        raise _too_large()
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise _too_large()
    return bytes(body)


async def manifest(request: Request) -> TrainingJob:
    """The request's job manifest; 413 when too large, 415 for other media types, 400 naming what is malformed,
    422 naming each invalid field (trainingjob_sdk's Invalid), or saying it has neither name nor generateName."""
    return await _checked(request, to_create)


async def sweep_manifest(request: Request) -> TrainingSweep:
    """The request's sweep manifest, as `manifest` reads a job's (a sweep has a metadata.name: no generateName)."""
    return await _checked(request, sweep_to_create)


async def _checked(request: Request, check: Callable[[dict[str, Any]], T]) -> T:
    kind = media_type(request.headers.get("content-type"))  # none is none: a body is never guessed to be JSON
    parse: Callable[[str], Any]
    if kind in YAML_TYPES:
        parse = parse_yaml
    elif kind == "application/json" or kind.endswith("+json"):
        parse = parse_json
    else:
        raise ApiError(415, "UnsupportedMediaType", f"send the manifest as {ACCEPTED}, not {kind or 'no Content-Type'}")
    raw = await read_body(request)
    return await run_in_threadpool(_validate, raw, kind, parse, check)


def _validate(raw: bytes, media_type: str, parse: Callable[[str], Any], check: Callable[[dict[str, Any]], T]) -> T:
    try:
        document = parse(decode(raw))
    except (DocumentError, ValueError, yaml.YAMLError) as error:
        raise ApiError(400, "BadRequest", f"the body is not valid {media_type}: {error}") from None
    if not isinstance(document, dict):
        raise ApiError(422, "Invalid", "the manifest must be an object with apiVersion, kind, metadata and spec")
    return check(document)
