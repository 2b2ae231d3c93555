"""Reading a job manifest from a request body: JSON or YAML, validated with the one TrainingJob model."""

import json
from typing import Any

import yaml
from fastapi import Request
from pydantic import ValidationError

from trainingjob.model import TrainingJob
from trainingjob_api.errors import ApiError, invalid

YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml")
MAX_BODY_BYTES = 1 << 20
MANIFEST_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "A TrainingJob manifest, the same one `kubectl apply` takes, as JSON or YAML.",
        "content": {
            media_type: {"schema": {"$ref": "#/components/schemas/TrainingJob"}}
            for media_type in ("application/json", "application/yaml")
        },
    }
}


async def manifest(request: Request) -> TrainingJob:
    """The request's job manifest; 415 for other media types, 422 naming each invalid field."""
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        raise ApiError(413, "RequestEntityTooLarge", f"the manifest is larger than {MAX_BODY_BYTES} bytes")
    media_type = request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
    try:
        if media_type in YAML_TYPES:
            document = yaml.safe_load(raw)
        elif media_type == "application/json" or media_type.endswith("+json"):
            document = json.loads(raw)
        else:
            raise ApiError(415, "UnsupportedMediaType", "send the manifest as application/json or application/yaml")
    except (ValueError, yaml.YAMLError) as error:
        raise ApiError(400, "BadRequest", f"the body is not valid {media_type}: {error}") from None
    if not isinstance(document, dict):
        raise ApiError(422, "Invalid", "the manifest must be an object with apiVersion, kind, metadata and spec")
    try:
        return TrainingJob.model_validate(document)
    except ValidationError as error:
        raise invalid(error) from None
