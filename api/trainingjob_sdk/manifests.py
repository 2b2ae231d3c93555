"""Jobs from what people hand the SDK (a model, a dict, YAML text or a file, one document or several), checked by
the one TrainingJob model with errors naming the field; and jobs as the servers return them."""

import copy
import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import PrivateAttr, ValidationError

from trainingjob.model import KIND, ObjectMeta, TrainingJob
from trainingjob.model.job import MAX_NAME_LENGTH, ApiObject
from trainingjob.model.sweep import SWEEP_KIND
from trainingjob.plan.invalid import salvaged_status
from trainingjob_sdk.documents import DocumentError, decode, kind_of, parse_yaml_documents
from trainingjob_sdk.errors import FieldError, Invalid, TrainingJobError, field_path

log = logging.getLogger(__name__)
Manifest = dict[str, Any]
Source = TrainingJob | Mapping[str, Any] | str | bytes | Path
Sources = Source | Sequence[TrainingJob | Mapping[str, Any]]
GENERATED_SUFFIX = 5  # the apiserver appends five characters to metadata.generateName
FILE_SUFFIXES = (".yaml", ".yml", ".json")
PREFIX_PATTERN = r"^[a-z][-a-z0-9]*$"
FILE_HINT = "to read a file pass a Path or a name ending in .yaml, .yml or .json"
OTHER_KINDS = {  # what to do with a document of the project's other kind
    KIND: "submit it as a job (tjctl submit, client.create)",
    SWEEP_KIND: "submit it as a sweep (tjctl sweep submit, client.sweeps.create)",
}


class StoredJob(TrainingJob):
    """A job as a server returned it that the model refuses (stored before the model changed): its metadata, its
    status as far as it is still valid, its spec as stored (a dict, unchecked); `to_manifest` is the stored manifest
    as it is."""

    _stored: Manifest = PrivateAttr(default_factory=dict)

    def to_manifest(self) -> dict[str, Any]:
        return copy.deepcopy(self._stored)


def invalid(error: ValidationError, where: str = "the TrainingJob") -> Invalid:
    """An Invalid naming every field the model refused; found here, so without a server's status."""
    fields = [FieldError(field_path(tuple(e["loc"])), e["msg"]) for e in error.errors()]
    listed = ", ".join(sorted({f.field for f in fields}))
    return Invalid(f"{where} is invalid: {listed}", fields, status=None)


def _file_name(source: str) -> Path | None:
    """A one-line str ending in .yaml, .yml or .json (any case, spaces around it ignored) names a file."""
    name = source.strip()
    return Path(name) if "\n" not in name and name.lower().endswith(FILE_SUFFIXES) else None


def documents(source: Sources) -> list[Manifest]:
    """The manifests in `source`: a TrainingJob, a dict, YAML or JSON text (several documents allowed), a file
    holding it (a Path, or a one-line str ending in .yaml, .yml or .json), or a list of jobs and dicts."""
    if isinstance(source, TrainingJob):
        return [source.to_manifest()]
    if isinstance(source, Mapping):
        return [dict(source)]
    given = source
    source = (_file_name(source) or source) if isinstance(source, str) else source
    if not isinstance(source, str | bytes | Path):  # a list of jobs and dicts
        return [found for each in source for found in documents(each)]
    where = str(source) if isinstance(source, Path) else "the manifest"
    try:
        raw = source.read_bytes() if isinstance(source, Path) else source
    except OSError as error:
        raise Invalid(f"{where}: cannot read it: {error.strerror or error}", status=None) from None
    try:
        found = parse_yaml_documents(decode(raw) if isinstance(raw, bytes) else raw)
    except (yaml.YAMLError, DocumentError) as error:
        raise Invalid(f"{where}: cannot read it as YAML: {error}", status=None) from None
    if not found:
        raise Invalid(f"{where}: holds no document", status=None)
    for number, document in enumerate(found, 1):
        if isinstance(document, dict):
            continue
        if isinstance(given, str) and isinstance(source, str) and "\n" not in given.strip():
            raise Invalid(f"{given!r} is not a TrainingJob manifest; {FILE_HINT}", status=None)
        raise Invalid(f"{where}: document {number} is not an object (a TrainingJob manifest)", status=None)
    return found


def check_kind(manifest: Mapping[str, Any], expected: str, where: str | None = None) -> None:
    """Invalid saying that the manifest (named by `where`) is of another kind than `expected` (a claim in a file of
    jobs) and what to do, instead of the model's errors about the fields of an object it never was."""
    kind = manifest.get("kind")
    if not isinstance(kind, str) or kind in ("", expected):
        return
    said = f"is {kind_of(manifest)}, not a {expected}"
    todo = OTHER_KINDS.get(kind, f"apply it with kubectl apply -f, then submit the {expected}s without it")
    raise Invalid(f"{where or 'the manifest'} {said}: {todo}", [FieldError("kind", said)], status=None)


def to_create(manifest: Mapping[str, Any], where: str | None = None) -> TrainingJob:
    """A manifest checked for creation: a TrainingJob, valid for the model, named by metadata.name or
    metadata.generateName. Invalid naming it by `where` (default: the TrainingJob) otherwise."""
    check_kind(manifest, KIND, where)
    where = where or "the TrainingJob"
    try:
        job = TrainingJob.from_manifest(dict(manifest))
    except ValidationError as error:
        raise invalid(error, where) from None
    prefix = job.metadata.generate_name
    if not job.metadata.name and not prefix:
        raise Invalid(f"{where}: metadata.name or metadata.generateName is required", status=None)
    if prefix is not None and not job.metadata.name:
        longest = MAX_NAME_LENGTH - GENERATED_SUFFIX
        if not isinstance(prefix, str) or len(prefix) > longest or not re.fullmatch(PREFIX_PATTERN, prefix):
            message = f"a lowercase DNS label prefix (a-z, 0-9, '-', starting with a letter) of at most {longest}"
            raise Invalid(f"{where}: metadata.generateName must be {message} characters", status=None)
    return job


def create_body(job: ApiObject, namespace: str, where: str | None = None) -> Manifest:
    """What is sent to create `job` (a TrainingJob or a TrainingSweep) in `namespace`: the manifest without a
    status. Invalid (naming it by `where`, if given) when its own metadata.namespace is another."""
    if job.metadata.namespace not in (None, namespace):
        message = f"metadata.namespace: {job.metadata.namespace!r} is not {namespace!r}"
        raise Invalid(f"{where}: {message}" if where else message, status=None)
    body = job.to_manifest()
    body["metadata"]["namespace"] = namespace
    body.pop("status", None)
    return body


def as_job(raw: Mapping[str, Any]) -> TrainingJob:
    """A job as a server returned it. One stored before the model changed may not fit it any more: it comes back
    as a StoredJob (logged at DEBUG: a watch would say it on every event). Not a mapping: BadResponse."""
    if not isinstance(raw, Mapping):
        raise TrainingJobError(
            f"a server sent a job that is not a JSON object: {str(raw)[:100]!r}", reason="BadResponse"
        )
    try:
        return TrainingJob.from_manifest(dict(raw))
    except ValidationError as error:
        meta = raw.get("metadata") if isinstance(raw.get("metadata"), Mapping) else {}
        log.debug("%s does not fit the model: %s", (meta or {}).get("name"), error)
        job = StoredJob.model_construct(
            metadata=_metadata(meta or {}),
            spec=raw.get("spec"),  # type: ignore[arg-type]  # as stored: the model refused it
            status=salvaged_status(raw.get("status")),
        )
        job._stored = copy.deepcopy(dict(raw))
        return job


def _metadata(meta: Mapping[str, Any]) -> ObjectMeta:
    try:
        return ObjectMeta.model_validate(meta)
    except ValidationError:  # unlikely from a server: the name and namespace, if they are text
        name, namespace = meta.get("name"), meta.get("namespace")
        return ObjectMeta.model_construct(
            name=name if isinstance(name, str) else None, namespace=namespace if isinstance(namespace, str) else None
        )
