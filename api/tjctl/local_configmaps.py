"""The ConfigMaps beside a job's manifest, for `tjctl run`'s stand-ins of the pods' ConfigMap volumes, read as
kubectl reads them (trainingjob_sdk.documents): `lr: 1e-3` is a number and `debug: y` a boolean there, which a
ConfigMap's data (text only) refuses, and `warmup: 1:30` stays the text 1:30 (PyYAML would make it 90)."""

import json
from pathlib import Path
from typing import Any

import yaml

from tjctl.exits import UsageError
from trainingjob.local.files import ConfigMaps
from trainingjob_sdk.documents import DocumentError, parse_yaml_documents


def configmaps_in(folder: Path) -> ConfigMaps:
    """name -> data of every ConfigMap the YAML files in `folder` define. Files that are not YAML kubectl would
    read are skipped (they may be anything); a ConfigMap whose data kubectl would send and the apiserver refuse
    is a UsageError naming the file and the key."""
    found: ConfigMaps = {}
    for path in sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]):
        try:
            documents = parse_yaml_documents(path.read_text(encoding="utf-8"))
        except (DocumentError, yaml.YAMLError, OSError, UnicodeDecodeError):
            continue
        for document in documents:
            if isinstance(document, dict) and document.get("kind") == "ConfigMap":
                name = str((document.get("metadata") or {}).get("name", ""))
                found[name] = _data(document.get("data"), f"{path.name}: ConfigMap {name!r}")
    return found


def _data(data: Any, where: str) -> dict[str, str]:
    """The ConfigMap's data, every value text, as the apiserver takes it."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"{where}: data must be a mapping of keys to text")
    for key, value in data.items():
        if not isinstance(value, str):
            raise UsageError(
                f"{where}: data.{key} is {json.dumps(value)} to kubectl, not text, and the apiserver takes only text:"
                " quote the value"
            )
    return dict(data)
