"""What `tjctl run` checks before it starts anything: one valid, named TrainingJob in the file, a --kill that names
a replica the job has at a step it will reach, and the programs its pods run (PyTorch, torchrun) on this machine."""

import importlib.util
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tjctl.exits import UsageError
from trainingjob.children.contract import ROLE_PS, ROLE_WORKER
from trainingjob.children.specs import TRAINER_COMMAND
from trainingjob.local.cluster import BESIDE_PYTHON, Chaos
from trainingjob.local.files import ConfigMaps
from trainingjob.model import API_VERSION, KIND, Mode, RoleSpec, TrainingJob
from trainingjob.model.sweep import SWEEP_KIND, TrainingSweep
from trainingjob_sdk import Invalid
from trainingjob_sdk.documents import kinds_in
from trainingjob_sdk.manifests import documents, invalid, to_create
from trainingjob_sdk.pods import parse_replica

INSTALL = "pip install 'trainingjob[trainer]'"
PYTHONS = ("python", "python3")
KINDS = {ROLE_WORKER: "workers", ROLE_PS: "parameter servers"}


CONFIGMAP = "ConfigMap"  # beside the job or sweep, in the same file: what its pods' ConfigMap volumes hold


def _the_one(path: Path, kind: str, command: str) -> dict[str, Any]:
    """The one document of `path` that is not a ConfigMap (ConfigMaps may come with it, as kubectl applies them)."""
    readable(path)
    found = documents(path)
    main = [d for d in found if d.get("kind") != CONFIGMAP]
    if len(main) == 1 and main[0].get("kind") == kind:
        return main[0]
    has = f"{len(found)} documents ({kinds_in(found)})" if len(found) > 1 else kinds_in(found) or "no document"
    claim = any(d.get("kind") == "PersistentVolumeClaim" for d in found)
    hint = ": local mode needs no claim, its volumes are folders" if claim else ""
    said = f"{path}: {command} runs one {kind}, with any ConfigMaps it mounts; this file has {has}{hint}"
    raise Invalid(said, status=None)


def load(path: Path) -> tuple[dict[str, Any], TrainingJob]:
    """The one TrainingJob in `path` and its validated model; Invalid naming the file and each field otherwise."""
    readable(path)
    if any(d.get("kind") == SWEEP_KIND for d in documents(path)):
        raise UsageError(f"{path} is a TrainingSweep: run it with tjctl sweep run {path}")
    manifest = _the_one(path, KIND, "tjctl run")
    job = to_create(manifest, str(path))
    if not job.metadata.name:
        raise Invalid(f"{path}: metadata.name is required (tjctl run names its work folder after it)", status=None)
    return manifest, job


def load_sweep(path: Path, *, parallelism: int | None = None) -> tuple[dict[str, Any], TrainingSweep]:
    """The one TrainingSweep in `path` (with `parallelism`, if given, in place of its own) and its validated model;
    Invalid naming the file and each field otherwise."""
    manifest = _the_one(path, SWEEP_KIND, "tjctl sweep run")
    if parallelism is not None and isinstance(manifest.get("spec"), dict):
        manifest = {**manifest, "spec": {**manifest["spec"], "parallelism": parallelism}}
    try:
        sweep = TrainingSweep.from_manifest(manifest)
    except ValidationError as error:
        raise invalid(error, str(path)) from None
    if not sweep.metadata.name:
        raise Invalid(
            f"{path}: metadata.name is required (tjctl sweep run names its work folder after it)", status=None
        )
    return manifest, sweep


def trial_job(sweep: TrainingSweep) -> TrainingJob:
    """The job a trial runs, before its parameters are filled in: what check_programs looks at."""
    spec = sweep.spec.template.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    return TrainingJob.from_manifest(
        {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": "trial"}, "spec": spec}
    )


def readable(path: Path) -> None:
    if not path.is_file():
        raise UsageError(f"{path}: {'not a file' if path.exists() else 'no such file'}")


def _replicas(job: TrainingJob, role: str) -> int:
    if role == ROLE_WORKER:
        return job.spec.workers.replicas
    servers = job.spec.parameter_servers
    return servers.replicas if job.spec.mode == Mode.PARAMETER_SERVER and servers is not None else 0


def chaos(value: str | None, job: TrainingJob) -> Chaos | None:
    """--kill REPLICA@STEP checked against the job: a replica it has (worker-N; ps-N in ParameterServer mode) and a
    step in 1..steps-1 (a kill at or after the last step would never happen)."""
    if value is None:
        return None
    found = re.fullmatch(r"([^@]+)@([0-9]{1,10})", value)
    if found is None:
        raise UsageError(f"--kill {value}: expected REPLICA@STEP, e.g. worker-1@250")
    try:
        slot = parse_replica(found[1])
    except Invalid as error:
        raise UsageError(f"--kill {value}: {error.message}") from None
    count, kind = _replicas(job, slot.role), KINDS[slot.role]
    if slot.index >= count:
        has = f"{count} {kind} ({slot.role}-0 to {slot.role}-{count - 1})" if count else f"no {kind}"
        why = "" if count or slot.role != ROLE_PS else " (parameter servers are only in mode ParameterServer)"
        raise UsageError(f"--kill {value}: the job has {has}{why}")
    step = int(found[2])
    steps = job.spec.trainer.steps if job.spec.trainer else None
    if step < 1 or (steps is not None and step >= steps):
        within = f"1 to {steps - 1} (the trainer runs {steps} steps)" if steps is not None else "1 or more"
        raise UsageError(f"--kill {value}: the step must be {within}")
    return Chaos(f"{slot.role}-{slot.index}", step)


def _roles(job: TrainingJob) -> list[RoleSpec]:
    roles: list[RoleSpec] = [job.spec.workers]
    if job.spec.mode == Mode.PARAMETER_SERVER and job.spec.parameter_servers is not None:
        roles.append(job.spec.parameter_servers)
    return roles


def _commands(job: TrainingJob) -> list[tuple[str, ...]]:
    return [tuple(role.command) if role.command else TRAINER_COMMAND for role in _roles(job)]


def check_configmaps(job: TrainingJob, configmaps: ConfigMaps, command: str) -> None:
    """UsageError, before anything starts, for a ConfigMap the pods mount (not optional) whose manifest is neither
    beside the file nor in it: local mode has no cluster to find it in."""
    for role in _roles(job):
        for volume in role.volumes or []:
            source = volume.config_map
            if source is not None and not source.optional and source.name not in configmaps:
                raise UsageError(
                    f"{command}: the pods mount ConfigMap {source.name!r} (volume {volume.name!r}); put its manifest"
                    f" in the same file or a YAML file beside it (kubectl create configmap {source.name}"
                    f" --from-file=... --dry-run=client -o yaml > {source.name}.yaml)"
                )


def check_programs(job: TrainingJob) -> None:
    """UsageError, before anything starts, when a program the pods run is not on this machine: PyTorch for the
    built-in trainer, torchrun (beside this Python, as in the image, or on PATH), a command's program on PATH."""
    for command in _commands(job):
        program = command[0]
        trainer = command[: len(TRAINER_COMMAND)] == TRAINER_COMMAND
        if (trainer or program == "torchrun") and importlib.util.find_spec("torch") is None:
            what = "the built-in trainer needs" if trainer else "the job runs torchrun, which needs"
            raise UsageError(f"tjctl run: {what} PyTorch, which this Python ({sys.executable}) lacks: {INSTALL}")
        if program == "torchrun" and not (BESIDE_PYTHON / "torchrun").exists() and not shutil.which("torchrun"):
            raise UsageError(f"tjctl run: the job runs torchrun, which is neither beside {sys.executable} nor on PATH")
        if program not in (*PYTHONS, "torchrun") and "/" not in program and not shutil.which(program):
            raise UsageError(f"tjctl run: the job runs {program!r}, which is not on PATH")


WORKDIR_MARK = ".tjctl-workdir"  # in every folder tjctl run or sweep run made: the only folders they clear


def claim_workdir(path: Path, named: bool) -> None:
    """Make `path` a work folder of tjctl's (marked). One the user `named` (--workdir) that already holds files tjctl
    did not put there is refused: tjctl clears what an earlier run left in its own folders, never in someone else's
    (the default, .tjctl/<name>, is tjctl's whatever it holds)."""
    if path.exists() and not path.is_dir():
        raise UsageError(f"--workdir {path}: not a folder")
    if named and path.is_dir() and not (path / WORKDIR_MARK).exists() and any(path.iterdir()):
        raise UsageError(
            f"--workdir {path}: the folder holds files tjctl did not make, and tjctl clears its work folder: "
            "name a new or empty folder"
        )
    path.mkdir(parents=True, exist_ok=True)
    (path / WORKDIR_MARK).write_text("made by tjctl: its runs clear what an earlier run left here\n")


def clear_workdir(path: Path, names: tuple[str, ...] | None = None) -> None:
    """Remove what an earlier run left in tjctl's work folder `path`: the entries `names`, or all but its mark."""
    for entry in list(path.iterdir()):
        if entry.name == WORKDIR_MARK or (names is not None and entry.name not in names):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
