"""A sweep's trial removes the checkpoint folders of the sweep's finished trials as it starts (TJ_REMOVE_CHECKPOINTS,
from its job's trainingjob.io/remove-checkpoints annotation): the operator has no access to volumes.

The list comes from an annotation anyone who may edit the job may write, so it is hostile input: an entry is removed
only when it is "<job name>/<job uid>" of a job of the same sweep (named "<sweep>-<number>", as this trial's job is;
never this job's own), both parts plain names (no '/', '.' or '..'), directly under the checkpoint root (the folder
above this job's <job name>/<job uid>), and both folders real folders, not symbolic links. The removal itself does
not follow symbolic links inside them (shutil.rmtree's file-descriptor walk). What it says: the entries gone once it
is done (removed now, or already gone: never written, or removed by an earlier trial), which the sweep records."""

import json
import logging
import os
import re
import shutil
import stat
from contextlib import suppress
from pathlib import Path
from typing import Any

from trainer import contract as c
from trainer.contract import ExitCode
from trainer.env import TrainerEnv
from trainer.failures import ConfigError
from trainer.progress_endpoint import ProgressReporter

log = logging.getLogger(__name__)

MAX_FOLDERS = 64  # as the operator names at most
_JOB_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_UID = re.compile(r"[A-Za-z0-9][-A-Za-z0-9]{0,63}")


def sweep_of(job: str) -> str | None:
    """The sweep a trial's job belongs to ("<sweep>-<number>"), or None for a job not named so."""
    head, dash, number = job.rpartition("-")
    return head if dash and head and number.isdigit() else None


def parse(raw: str) -> list[Any]:
    """The variable's JSON list; [] for anything else (said in the log)."""
    if not raw.strip():
        return []
    try:
        named = json.loads(raw)
    except ValueError:
        named = None
    if not isinstance(named, list):
        log.warning("checkpoint folders to remove: not a JSON list, ignored")
        return []
    return named


def _allowed(entry: Any, sweep: str, own: str) -> tuple[str, str] | None:
    if not isinstance(entry, str):
        return None
    name, slash, uid = entry.partition("/")
    if not slash or not _JOB_NAME.fullmatch(name) or not _UID.fullmatch(uid):
        return None
    return (name, uid) if sweep_of(name) == sweep and name != own else None


def remove_folders(checkpoint_dir: Path, job: str, named: list[Any], sweep: str | None = None) -> list[str]:
    """Remove the named folders that this job (`job`, checkpointing to `checkpoint_dir`; a trial of its sweep, or
    the sweeper of `sweep`) may remove; the named folders gone afterwards. Entries it may not touch are left, and
    said in the log."""
    sweep = sweep or sweep_of(job)
    if sweep is None or not named:
        return []
    root = checkpoint_dir.parent.parent
    gone = []
    for entry in named[:MAX_FOLDERS]:
        parts = _allowed(entry, sweep, job)
        if parts is None:
            log.warning("checkpoint folder %.200r is not one of sweep %s's trials': left alone", entry, sweep)
        elif _removed(root, *parts):
            gone.append(f"{parts[0]}/{parts[1]}")
    if gone:
        log.info("removed the checkpoint folders of %d finished trials of sweep %s", len(gone), sweep)
    return gone


def clear_checkpoints(env: TrainerEnv) -> dict[str, Any]:
    """Rank 0 of a sweep's trial, as it starts: remove the folders TJ_REMOVE_CHECKPOINTS names; {"checkpointsCleared":
    the ones gone} for its progress report, or nothing when it was told none."""
    named = parse(env.remove_checkpoints)
    if not named or env.checkpoint.directory is None:
        return {}
    return {"checkpointsCleared": remove_folders(env.checkpoint.directory, env.job_name, named)}


def sweep_only(env: TrainerEnv, sweep: str) -> ExitCode:
    """`python -m trainer --remove-checkpoints <sweep>`: a sweep's sweeper, which runs once every trial has
    finished. Rank 0 removes the folders TJ_REMOVE_CHECKPOINTS names (as a trial does as it starts), reports the
    ones gone (its final report: the termination message the operator reads once it has exited), and exits; it
    trains nothing, loads no recipe and runs no command of the user's."""
    if not _JOB_NAME.fullmatch(sweep):
        raise ConfigError("command", c.SWEEPER_FLAG, f"{sweep[:100]!r} is not a sweep's name")
    if env.rank != 0 or env.role != c.ROLE_WORKER:
        return ExitCode.SUCCEEDED
    if env.checkpoint.directory is None:
        raise ConfigError("environment", c.CHECKPOINT_DIR, "a sweeper needs the checkpoint volume")
    reporter = ProgressReporter(env.attempt, env.progress_port, env.progress_file).start()
    gone = remove_folders(env.checkpoint.directory, env.job_name, parse(env.remove_checkpoints), sweep)
    reporter.update(checkpointsCleared=gone, finished=True)
    reporter.close()
    log.info("sweeper of sweep %s: %d checkpoint folders gone", sweep, len(gone))
    return ExitCode.SUCCEEDED


def _real_folder(path: Path) -> bool | None:
    """True for a folder, False for anything else (a symbolic link, a file), None when nothing is there."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return None


def _removed(root: Path, name: str, uid: str) -> bool:
    """Remove root/name/uid (and root/name once empty); whether it is gone."""
    parent, target = root / name, root / name / uid
    for path in (parent, target):
        kind = _real_folder(path)
        if kind is None:
            return True
        if not kind:
            log.warning("checkpoint folder %s is not a folder (a link?): left alone", path)
            return False
    try:
        shutil.rmtree(target, onerror=_vanished)
    except OSError as error:
        log.warning("could not remove checkpoint folder %s: %s", target, error)
    with suppress(OSError):  # not empty (another incarnation of that job), or gone
        parent.rmdir()
    return not os.path.lexists(target)


def _vanished(function: Any, path: str, info: Any) -> None:
    """rmtree's error handler: a file another trial removed first is fine; anything else is raised."""
    if not isinstance(info[1], FileNotFoundError):
        raise info[1]
