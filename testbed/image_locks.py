"""The images' hash-locked requirements: generated from uv.lock (`make locks`), checked against it (the fast tier).

Each image installs its Python packages with `pip install --no-deps --require-hashes -r <its lock>`, so a build
resolves nothing and downloads nothing whose sha256 uv.lock does not name. `uv export` writes the files (it
carries each package's environment markers, e.g. torch's CUDA wheels on Linux only); the functions here re-derive,
from uv.lock alone, which packages each lock must hold at which versions and hashes, so a stale or hand-edited lock
is caught without uv.

    python -m testbed.image_locks --uv PATH-TO-UV     (what `make locks` runs)
"""

import argparse
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PROJECT = "trainingjob"


@dataclass(frozen=True)
class ImageLock:
    """One image's lock: the project extra it installs and which of the base dependencies it keeps (all: None)."""

    image: str
    path: str  # relative to the repository, inside the image's build context
    extra: str
    base_kept: tuple[str, ...] | None


LOCKS = (
    # The trainer needs no Kubernetes client: of the base dependencies only pydantic (TJ_TRAINER_CONFIG).
    ImageLock("trainer", "trainer-image/requirements.lock", "trainer", ("pydantic",)),
    ImageLock("operator", "operator/requirements.lock", "operator", None),
    ImageLock("api", "api/requirements.lock", "api", None),
)


@dataclass(frozen=True)
class Pin:
    version: str
    hashes: frozenset[str]


def normalized(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def locked_packages(uv_lock: str) -> dict[str, dict[str, Any]]:
    """uv.lock's packages by normalized name (this project's lock has one version of each)."""
    return {normalized(package["name"]): package for package in tomllib.loads(uv_lock)["package"]}


def _edges(package: Mapping[str, Any], extra: str | None) -> list[dict[str, Any]]:
    if extra is None:
        return list(package.get("dependencies", []))
    return list(package.get("optional-dependencies", {}).get(extra, []))


def closure(packages: Mapping[str, Mapping[str, Any]], lock: ImageLock) -> set[str]:
    """Every package the image needs: its extra's and its kept base dependencies, with theirs (and their extras'),
    whatever their markers (the lock keeps the markers; pip skips what does not apply)."""
    project = packages[PROJECT]
    kept = lock.base_kept
    todo = [e for e in _edges(project, None) if kept is None or normalized(e["name"]) in kept]
    todo += _edges(project, lock.extra)
    seen: set[tuple[str, str | None]] = set()
    while todo:
        edge = todo.pop()
        name = normalized(edge["name"])
        for extra in (None, *edge.get("extra", ())):
            if (name, extra) not in seen:
                seen.add((name, extra))
                todo += _edges(packages[name], extra)
    return {name for name, _ in seen} - {PROJECT}


def expected_pins(packages: Mapping[str, Mapping[str, Any]], lock: ImageLock) -> dict[str, Pin]:
    """What the lock must pin: each needed package at uv.lock's version with every hash uv.lock has for it."""
    pins = {}
    for name in closure(packages, lock):
        package = packages[name]
        files = [*package.get("wheels", []), *([package["sdist"]] if "sdist" in package else [])]
        pins[name] = Pin(package["version"], frozenset(f["hash"] for f in files))
    return pins


def pinned(requirements: str) -> dict[str, Pin]:
    """The pins of a `uv export` requirements file (`name==version ; marker --hash=sha256:... ...`)."""
    logical = re.sub(r"\\\n", " ", requirements)
    pins = {}
    for line in logical.splitlines():
        requirement = line.split("#", 1)[0].strip()
        if match := re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", requirement):
            pins[normalized(match[1])] = Pin(match[2], frozenset(re.findall(r"--hash=(\S+)", requirement)))
    return pins


def drift(requirements: str, packages: Mapping[str, Mapping[str, Any]], lock: ImageLock) -> list[str]:
    """How a lock disagrees with uv.lock: packages missing or extra, versions or hashes that differ."""
    have, want = pinned(requirements), expected_pins(packages, lock)
    problems = [f"{name}: not in {lock.path}" for name in sorted(want.keys() - have.keys())]
    problems += [f"{name}: in {lock.path}, not needed by uv.lock" for name in sorted(have.keys() - want.keys())]
    for name in sorted(want.keys() & have.keys()):
        if have[name].version != want[name].version:
            problems.append(f"{name}: {lock.path} pins {have[name].version}, uv.lock {want[name].version}")
        elif have[name].hashes != want[name].hashes:
            problems.append(f"{name}: {lock.path}'s hashes are not uv.lock's")
    return problems


def export_command(uv: str, packages: Mapping[str, Mapping[str, Any]], lock: ImageLock) -> list[str]:
    """`uv export` for one image: the extra, without the base dependencies outside the image's closure."""
    needed = closure(packages, lock)
    pruned = sorted({normalized(e["name"]) for e in _edges(packages[PROJECT], None)} - needed)
    command = [uv, "export", "--frozen", "--no-dev", "--no-emit-project", "--no-header", "--extra", lock.extra]
    return command + [arg for name in pruned for arg in ("--prune", name)]


def header(lock: ImageLock, command: Iterable[str]) -> str:
    shown = " ".join(["uv", *list(command)[1:]])
    return (
        f"# The {lock.image} image's Python packages, generated from uv.lock by `make locks`: do not edit.\n"
        f"# Installed with: pip install --no-deps --require-hashes -r {Path(lock.path).name}\n"
        f"# A fast test (tests/unit/test_image_locks.py) fails when this file and uv.lock disagree.\n"
        f"#    {shown}\n"
    )


def write_lock(uv: str, lock: ImageLock) -> None:
    packages = locked_packages((REPO / "uv.lock").read_text())
    command = export_command(uv, packages, lock)
    body = subprocess.run(command, cwd=REPO, check=True, capture_output=True, text=True).stdout
    problems = drift(body, packages, lock)
    if problems:  # uv's export and this module's reading of uv.lock must agree, or the fast test could not hold
        raise SystemExit(f"{lock.path}: uv export disagrees with uv.lock's graph: {problems}")
    (REPO / lock.path).write_text(header(lock, command) + body)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--uv", required=True, help="the uv binary (the Makefile's $(UV))")
    args = parser.parse_args(argv)
    for lock in LOCKS:
        write_lock(args.uv, lock)
        print(f"[locks] {lock.path}", file=sys.stderr)


if __name__ == "__main__":
    main()
