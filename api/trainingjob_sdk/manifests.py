"""Jobs from what people hand the SDK (a model, a dict, YAML text or a file, one document or several), checked by
the one TrainingJob model with errors naming the field; and jobs as the servers return them."""

import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from trainingjob.model import ObjectMeta, TrainingJob
from trainingjob.model.job import MAX_NAME_LENGTH
from trainingjob.plan.invalid import salvaged_status
from trainingjob_sdk.documents import DocumentError, decode, parse_yaml_documents
from trainingjob_sdk.errors import FieldError, Invalid

log = logging.getLogger(__name__)
Manifest = dict[str, Any]
Source = TrainingJob | Mapping[str, Any] | str | bytes | Path
GENERATED_SUFFIX = 5  # the apiserver appends five characters to metadata.generateName
FILE_SUFFIXES = (".yaml", ".yml", ".json")
PREFIX_PATTERN = r"^[a-z][-a-z0-9]*$"


def field_path(location: tuple[int | str, ...] | list[int | str]) -> str:
    """pydantic's error location as the field path people write: spec.workers.env[0].name."""
    path = ""
    for part in location:
        if isinstance(part, int):
            path += f"[{part}]"
        elif not str(part).startswith(("function-", "model-")):
            path += f".{part}" if path else str(part)
    return path or "(the document)"


def invalid(error: ValidationError, where: str = "the TrainingJob") -> Invalid:
    """An Invalid naming every field the model refused."""
    fields = [FieldError(field_path(tuple(e["loc"])), e["msg"]) for e in error.errors()]
    listed = ", ".join(sorted({f.field for f in fields}))
    return Invalid(f"{where} is invalid: {listed}", fields)


def documents(source: Source) -> list[Manifest]:
    """The manifests in `source`: a TrainingJob, a dict, YAML or JSON text (several documents allowed), or a
    file holding it (a Path, or a one-line str ending in .yaml, .yml or .json)."""
    if isinstance(source, TrainingJob):
        return [source.to_manifest()]
    if isinstance(source, Mapping):
        return [dict(source)]
    if isinstance(source, str) and "\n" not in source and source.endswith(FILE_SUFFIXES):
        source = Path(source)  # a file name, not YAML text
    where = str(source) if isinstance(source, Path) else "the manifest"
    try:
        raw = source.read_bytes() if isinstance(source, Path) else source
        text = decode(raw) if isinstance(raw, bytes) else raw
        found = parse_yaml_documents(text)
    except (OSError, yaml.YAMLError, DocumentError) as error:
        raise Invalid(f"{where}: cannot read it as YAML: {error}", status=None) from None
    if not found:
        raise Invalid(f"{where}: holds no document", status=None)
    for number, document in enumerate(found, 1):
        if not isinstance(document, dict):
            raise Invalid(f"{where}: document {number} is not an object (a TrainingJob manifest)", status=None)
    return found


def to_create(manifest: Mapping[str, Any], where: str = "the TrainingJob") -> TrainingJob:
    """A manifest checked for creation: valid for the model, named by metadata.name or metadata.generateName."""
    try:
        job = TrainingJob.from_manifest(dict(manifest))
    except ValidationError as error:
        raise invalid(error, where) from None
    prefix = (job.metadata.model_extra or {}).get("generateName")
    if not job.metadata.name and not prefix:
        raise Invalid(f"{where}: metadata.name or metadata.generateName is required", status=None)
    if prefix is not None and not job.metadata.name:
        longest = MAX_NAME_LENGTH - GENERATED_SUFFIX
        if not isinstance(prefix, str) or len(prefix) > longest or not re.fullmatch(PREFIX_PATTERN, prefix):
            message = f"a lowercase DNS label prefix (a-z, 0-9, '-', starting with a letter) of at most {longest}"
            raise Invalid(f"{where}: metadata.generateName must be {message} characters", status=None)
    return job


def create_body(job: TrainingJob, namespace: str) -> Manifest:
    """What is sent to create `job` in `namespace`: the manifest without a status."""
    if job.metadata.namespace not in (None, namespace):
        raise Invalid(f"metadata.namespace: {job.metadata.namespace!r} is not {namespace!r}", status=None)
    body = job.to_manifest()
    body["metadata"]["namespace"] = namespace
    body.pop("status", None)
    return body


def as_job(raw: Mapping[str, Any]) -> TrainingJob:
    """A job as a server returned it. One stored before the model changed may not fit it any more: it comes back
    with its metadata, its status as far as it is still valid, and its spec as stored (unchecked)."""
    try:
        return TrainingJob.from_manifest(dict(raw))
    except ValidationError as error:
        meta = raw.get("metadata") if isinstance(raw.get("metadata"), Mapping) else {}
        log.warning("%s does not fit the model: %s", (meta or {}).get("name"), error)
        return TrainingJob.model_construct(
            metadata=ObjectMeta.model_validate(meta or {}),
            spec=raw.get("spec"),  # type: ignore[arg-type]  # as stored: the model refused it
            status=salvaged_status(raw.get("status")),
        )
