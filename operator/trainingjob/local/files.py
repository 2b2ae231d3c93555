"""Local mode's stand-ins for a pod's volumes, so a job runs as written: a ConfigMap volume becomes a folder of the
files a ConfigMap manifest beside the job's defines, an emptyDir a fresh folder, and the paths the trainer's
container names (command, args, workingDir, env values) under their mount paths are moved to those folders."""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

ConfigMaps = dict[str, dict[str, str]]  # name -> data, from the manifests beside the job's (tjctl reads them)
_SYSTEM_MOUNTS = ("/dev/shm", "/var/run/")  # the runtime's shared memory, the job key: local mode has its own


def _configmap_folder(source: Mapping[str, Any], configmaps: ConfigMaps, root: Path) -> Path:
    name = str(source.get("name", ""))
    if name not in configmaps:
        raise ValueError(
            f"local mode needs ConfigMap {name!r} as a manifest beside the job's "
            f"(kubectl create configmap {name} --from-file=... --dry-run=client -o yaml > {name}.yaml)"
        )
    folder = root / "configmaps" / name
    folder.mkdir(parents=True, exist_ok=True)
    items = source.get("items") or [{"key": key, "path": key} for key in configmaps[name]]
    for item in items:
        target = (folder / str(item["path"])).resolve()
        if not target.is_relative_to(folder.resolve()):  # the model refuses '..' too: this folder is local mode's
            raise ValueError(f"ConfigMap {name!r}: items path {str(item['path'])!r} leaves the volume's folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(configmaps[name][str(item["key"])])
    return folder


def mount_folders(pod_spec: Mapping[str, Any], configmaps: ConfigMaps, root: Path) -> dict[str, Path]:
    """mount path -> local folder, for the trainer container's ConfigMap and emptyDir mounts."""
    volumes = {volume["name"]: volume for volume in pod_spec.get("volumes", [])}
    folders: dict[str, Path] = {}
    for mount in pod_spec["containers"][0].get("volumeMounts", []):
        path, volume = str(mount["mountPath"]), volumes.get(mount["name"], {})
        if path.startswith(_SYSTEM_MOUNTS):
            continue
        if "configMap" in volume:
            folders[path] = _configmap_folder(volume["configMap"], configmaps, root)
        elif "emptyDir" in volume:
            folders[path] = root / "volumes" / str(mount["name"])
            folders[path].mkdir(parents=True, exist_ok=True)
    return folders


def relocate(value: str, folders: Mapping[str, Path]) -> str:
    """`value` with a leading mount path (the longest that matches) replaced by its local folder."""
    for path in sorted(folders, key=len, reverse=True):
        stem = path.rstrip("/")
        if value == stem or value.startswith(f"{stem}/"):
            return str(folders[path]) + value[len(stem) :]
    return value
