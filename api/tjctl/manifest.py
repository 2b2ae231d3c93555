"""Reading a TrainingJob manifest file, with errors that name the offending field."""

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from trainingjob.model import TrainingJob
from trainingjob_sdk.documents import DocumentError, decode, parse_yaml


class ManifestError(Exception):
    """A manifest that cannot be used; the message names the file and the field."""


def field_path(location: tuple[int | str, ...]) -> str:
    """pydantic's error location as the field path people write: spec.workers[0].replicas."""
    path = ""
    for part in location:
        if isinstance(part, int):
            path += f"[{part}]"
        elif not str(part).startswith(("function-", "model-")):
            path += f".{part}" if path else str(part)
    return path or "(the document)"


def load(path: Path) -> tuple[dict[str, Any], TrainingJob]:
    """The raw manifest and the validated job."""
    try:
        manifest = parse_yaml(decode(path.read_bytes()))
    except (OSError, yaml.YAMLError, DocumentError) as error:
        raise ManifestError(f"{path}: cannot read it as YAML: {error}") from error
    if not isinstance(manifest, dict):
        raise ManifestError(f"{path}: expected one TrainingJob object")
    try:
        job = TrainingJob.from_manifest(manifest)
    except ValidationError as error:
        lines = [f"  {field_path(e['loc'])}: {e['msg']}" for e in error.errors()]
        raise ManifestError(f"{path}: the TrainingJob is invalid:\n" + "\n".join(lines)) from error
    if not job.metadata.name:
        raise ManifestError(f"{path}: metadata.name is required")
    return manifest, job
