"""Every Dockerfile's supply chain, read from the files: each stage starts from a base pinned by digest (a build
argument whose default names one, and which scripts/build-images.sh overrides with its local stand-in), and every
pip install installs only a hash-locked file that `make locks` generates."""

import os
import re
import shlex
from pathlib import Path

import pytest
from testbed.image_locks import LOCKS

pytestmark = pytest.mark.fast

REPO = Path(__file__).resolve().parents[2]
DIGEST = re.compile(r"[^@\s]+@sha256:[0-9a-f]{64}")
LOCK_NAMES = {Path(lock.path).name for lock in LOCKS}


def dockerfiles() -> list[Path]:
    """Every Dockerfile in the checkout (hidden folders, such as a demo cluster's, left out)."""
    found = []
    for folder, subfolders, files in os.walk(REPO):
        subfolders[:] = [s for s in subfolders if not s.startswith(".") and s not in {"node_modules", "__pycache__"}]
        found += [Path(folder) / f for f in files if f == "Dockerfile" or f.endswith(".Dockerfile")]
    return sorted(found)


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined and comment lines dropped."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    parsed = []
    for line in joined.splitlines():
        if line.strip():
            keyword, _, rest = line.strip().partition(" ")
            parsed.append((keyword.upper(), rest.strip()))
    return parsed


def base_problems(text: str) -> list[str]:
    """FROMs whose base is not pinned by digest: a stage, a digest, or a global ARG whose default is one."""
    global_args: dict[str, str] = {}
    stages: set[str] = set()
    problems = []
    for keyword, rest in instructions(text):
        if keyword == "ARG" and not stages and "=" in rest:
            name, _, default = rest.partition("=")
            global_args[name.strip()] = default.strip().strip("\"'")
        elif keyword == "FROM":
            words = [w for w in rest.split() if not w.startswith("--")]
            image = words[0]
            if arg := re.fullmatch(r"\$\{?(\w+)\}?", image):
                image = global_args.get(arg[1], f"(no default for {arg[1]})")
            if words[0] not in stages and not DIGEST.fullmatch(image):
                problems.append(f"FROM {rest}: {image} is not pinned by digest")
            if len(words) == 3 and words[1].upper() == "AS":
                stages.add(words[2])
            stages.add(f"#{len(stages)}")  # a stage, named or not: later ARGs are the stage's own
    return problems


def install_problems(text: str) -> list[str]:
    """pip installs that are not `--no-deps --require-hashes -r <a generated lock>` and nothing else."""
    problems = []
    for keyword, rest in instructions(text):
        if keyword != "RUN":
            continue
        for command in re.split(r"&&|\|\||;|\|", rest):
            words = shlex.split(command)
            if "install" not in words or not {"pip", "pip3", "/opt/venv/bin/pip"} & {Path(w).name for w in words}:
                continue
            args = words[words.index("install") + 1 :]
            files = [args[i + 1] for i, a in enumerate(args[:-1]) if a in {"-r", "--requirement"}]
            named = [a for a in args if not a.startswith("-") and a not in files]
            if "--require-hashes" not in args or "--no-deps" not in args or named:
                problems.append(f"RUN {command.strip()}: not --no-deps --require-hashes -r <lock> alone")
            foreign = [f for f in files if Path(f).name not in LOCK_NAMES]
            problems += [f"RUN {command.strip()}: {f} is no generated lock" for f in foreign]
    return problems


@pytest.mark.parametrize("path", dockerfiles(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_stage_starts_from_a_base_pinned_by_digest(path: Path) -> None:
    assert base_problems(path.read_text()) == []


@pytest.mark.parametrize("path", dockerfiles(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_pip_install_installs_a_hash_locked_file_only(path: Path) -> None:
    assert install_problems(path.read_text()) == []


def test_the_checks_see_all_four_images_and_one_base() -> None:
    found = {str(p.relative_to(REPO)) for p in dockerfiles()}
    assert {"trainer-image/Dockerfile", "operator/Dockerfile", "api/Dockerfile"} <= found
    assert "testbed/provisioner/Dockerfile" in found
    defaults = {m for p in dockerfiles() for m in re.findall(r"^ARG PYTHON_IMAGE=(\S+)$", p.read_text(), re.M)}
    assert len(defaults) == 1 and DIGEST.fullmatch(defaults.pop())  # one base, one digest to update


def test_build_images_overrides_every_base_argument() -> None:
    """The local build has no Docker Hub: every argument a FROM reads must be passed its local stand-in."""
    script = (REPO / "scripts" / "build-images.sh").read_text()
    passed = set(re.findall(r'--build-arg "?(\w+)=', script))
    read = {m for p in dockerfiles() for m in re.findall(r"^FROM \$\{?(\w+)", p.read_text(), re.M)}
    assert read and read <= passed


PIN = "python:3.11-slim-bookworm@sha256:" + "a" * 64
BASES = [  # (id, Dockerfile, the problems base_problems reports)
    ("tag only", "FROM python:3.11-slim\n", 1),
    ("digest", f"FROM {PIN}\n", 0),
    ("arg with digest", f"ARG B={PIN}\nFROM ${{B}} AS deps\nFROM deps\nFROM $B\n", 0),
    ("arg with tag", "ARG B=python:3.11-slim\nFROM ${B}\n", 1),
    ("arg without default", "ARG B\nFROM ${B}\n", 1),
    ("stage arg is not global", f"FROM {PIN}\nARG B={PIN}\nFROM ${{B}}\n", 1),
    ("short digest", "FROM python@sha256:abc\n", 1),
    ("second stage unpinned", f"FROM {PIN} AS a\nFROM --platform=linux/amd64 python:3.11\n", 1),
]


@pytest.mark.parametrize(("text", "count"), [(t, c) for _, t, c in BASES], ids=[i for i, _, _ in BASES])
def test_base_problems(text: str, count: int) -> None:
    assert len(base_problems(text)) == count, base_problems(text)


INSTALLS = [  # (id, RUN arguments, the problems install_problems reports)
    ("hash-locked", "pip install --no-deps --require-hashes -r /tmp/requirements.lock", 0),
    ("in a venv", "python -m venv /v && /opt/venv/bin/pip install --no-deps --require-hashes -r requirements.lock", 0),
    ("pins by hand", "pip install torch==2.15.0 numpy==2.4.6", 1),
    ("a package beside the lock", "pip install --no-deps --require-hashes -r requirements.lock uv==0.13.9", 1),
    ("no --require-hashes", "pip install --no-deps -r requirements.lock", 1),
    ("resolves dependencies", "pip install --require-hashes -r requirements.lock", 1),
    ("someone else's file", "pip install --no-deps --require-hashes -r requirements.txt", 1),
    ("continued lines", "apt-get update && \\\n    pip3 install \\\n    uv", 1),
    ("python -m pip", "python -m pip install uv", 1),
]


@pytest.mark.parametrize(("run", "count"), [(r, c) for _, r, c in INSTALLS], ids=[i for i, _, _ in INSTALLS])
def test_install_problems(run: str, count: int) -> None:
    text = f"FROM {PIN}\nRUN {run}\n"
    assert len(install_problems(text)) == count, install_problems(text)
