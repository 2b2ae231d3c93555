"""The wheel as a user installs it: built once from this checkout (through its sdist, as `make dist` does), installed
into clean virtual environments on each Python that requires-python promises (3.11, 3.12, 3.13) at uv.lock's
versions, and run from a folder outside the checkout with PYTHONPATH unset, so nothing of the checkout is imported.

The base install is the light client (the SDK and tjctl): it must bring no torch, kopf or FastAPI. Each extra brings
what its part imports; `tjctl run` with the `trainer` extra runs examples/digits-ddp.yaml as shipped (3.11 only).

Needs uv ($TJ_UV: the Makefile's) and the interpreters beyond this one ($TJ_PYTHONS: ':'-separated paths, printed
by scripts/build-pythons.sh); `make test` passes both. A missing one fails these tests, it never skips them."""

import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from trainingjob import __version__

pytestmark = pytest.mark.package

REPO = Path(__file__).resolve().parents[2]
VERSIONS = ("3.11", "3.12", "3.13")
PACKAGES = ("trainingjob", "trainingjob_api", "tjctl", "trainingjob_sdk", "trainer")
# What the light client must not bring: the trainer's, the operator's and the API's heavy dependencies.
NOT_LIGHT = ("torch", "numpy", "sklearn", "kopf", "fastapi", "uvicorn", "optuna")
# What each extra makes importable: its part's entry modules (importing them starts nothing).
EXTRA_MODULES = {
    "operator": (
        "trainingjob.__main__",
        "trainingjob.runtime.operator",
        "trainingjob.runtime.metrics_server",
        "trainingjob.sweep.plan",
    ),
    "api": ("trainingjob_api.__main__", "trainingjob_api.app"),
}
# Variables that would point an install or a program at the checkout or at the project's venv.
CHECKOUT_VARIABLES = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")


def uv_environment() -> dict[str, str]:
    """This environment (uv's cache, index and proxy settings), less what points into the checkout."""
    env = {key: value for key, value in os.environ.items() if key not in CHECKOUT_VARIABLES}
    return env | {"UV_PYTHON_DOWNLOADS": "never", "UV_NO_PROGRESS": "1"}


def run(
    command: Sequence[str | Path], cwd: Path, env: dict[str, str], timeout: float = 300
) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(
        [str(part) for part in command], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def checked(result: "subprocess.CompletedProcess[str]") -> str:
    assert result.returncode == 0, f"{result.args} exited {result.returncode}:\n{result.stdout}{result.stderr}"
    return result.stdout


@dataclass(frozen=True)
class Venv:
    """A clean virtual environment with the wheel installed, and a folder outside the checkout to run in."""

    path: Path
    home: Path

    def run(self, *command: str | Path, timeout: float = 120) -> "subprocess.CompletedProcess[str]":
        """Run one of the venv's programs (by name) as a user would: from its own folder, PYTHONPATH unset."""
        env = {"PATH": f"{self.path / 'bin'}:/usr/bin:/bin", "HOME": str(Path.home()), "COLUMNS": "200"}
        return run([self.path / "bin" / str(command[0]), *command[1:]], self.home, env, timeout)

    def python(self, code: str) -> "subprocess.CompletedProcess[str]":
        return self.run("python", "-c", code)


@pytest.fixture(scope="session")
def uv() -> Path:
    path = Path(os.environ.get("TJ_UV", ""))
    if not path.is_file():
        pytest.fail(f"uv not found (TJ_UV={os.environ.get('TJ_UV', '')!r}): run the package tests with `make test`")
    return path


@pytest.fixture(scope="session")
def interpreters() -> dict[str, Path]:
    """Each promised version's interpreter: this one's base for 3.11, $TJ_PYTHONS for the others."""
    paths = [Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"]
    paths += [Path(p) for p in os.environ.get("TJ_PYTHONS", "").split(os.pathsep) if p]
    found: dict[str, Path] = {}
    for path in paths:
        version = run([path, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], REPO, {}).stdout.strip()
        found.setdefault(version, path)
    missing = [version for version in VERSIONS if version not in found]
    if missing:
        pytest.fail(
            f"no Python {', '.join(missing)} (TJ_PYTHONS={os.environ.get('TJ_PYTHONS', '')!r}): run "
            "`bash scripts/build-pythons.sh` and pass its lines joined by ':' as TJ_PYTHONS, as `make test` does"
        )
    return {version: found[version] for version in VERSIONS}


@pytest.fixture(scope="session")
def dist(uv: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and, built from it, the wheel (as `make dist` builds them), in a folder of their own."""
    out = tmp_path_factory.mktemp("dist")
    checked(run([uv, "build", "--out-dir", out], REPO, uv_environment()))
    return out


@pytest.fixture(scope="session")
def wheel(dist: Path) -> Path:
    wheels = list(dist.glob("*.whl"))
    assert [w.name for w in wheels] == [f"trainingjob-{__version__}-py3-none-any.whl"]
    return wheels[0]


@pytest.fixture(scope="session")
def constraints(uv: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """uv.lock's versions of everything any extra may install, as pip constraints."""
    path = tmp_path_factory.mktemp("lock") / "constraints.txt"
    command: list[str | Path] = [uv, "export", "--frozen", "--all-extras", "--no-dev", "--no-emit-project"]
    command += ["--no-hashes", "-o", path]
    checked(run(command, REPO, uv_environment()))
    return path


Installer = Callable[[str, str], Venv]


@pytest.fixture(scope="session")
def install(
    uv: Path, interpreters: dict[str, Path], wheel: Path, constraints: Path, tmp_path_factory: pytest.TempPathFactory
) -> Installer:
    """install(version, extras): a fresh venv on that Python with the wheel and those extras ("" for none)."""

    def make(version: str, extras: str) -> Venv:
        root = tmp_path_factory.mktemp(f"py{version}-{extras or 'light'}")
        venv, home = root / "venv", root / "home"
        home.mkdir()
        checked(run([uv, "venv", "--python", interpreters[version], venv], home, uv_environment()))
        requirement = f"trainingjob[{extras}] @ {wheel.as_uri()}" if extras else str(wheel)
        install: list[str | Path] = [uv, "pip", "install", "--python", venv / "bin" / "python"]
        install += ["--constraint", constraints, requirement]
        checked(run(install, home, uv_environment(), timeout=600))
        return Venv(venv, home)

    return make


@pytest.fixture(scope="session", params=VERSIONS)
def light(request: pytest.FixtureRequest, install: Installer) -> Venv:
    """The wheel alone, no extra: the light client."""
    return install(request.param, "")


def test_the_wheel_holds_the_five_packages_and_the_dashboard_and_nothing_else(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert tops == {*PACKAGES, f"trainingjob-{__version__}.dist-info"}
    assert not [name for name in names if "__pycache__" in name or name.endswith(".pyc") or "/tests/" in name]
    shipped = {name.removeprefix("trainingjob_api/") for name in names if name.startswith("trainingjob_api/ui/")}
    source = {str(path.relative_to(REPO / "api" / "trainingjob_api")) for path in (REPO / "api").glob("*/ui/**/*.*")}
    assert shipped == source and {"ui/index.html", "ui/style.css", "ui/favicon.svg", "ui/js/app.js"} <= shipped
    entry_points = zipfile.ZipFile(wheel).read(f"trainingjob-{__version__}.dist-info/entry_points.txt").decode()
    assert "tjctl = tjctl.__main__:main" in entry_points


def test_the_light_client_runs_tjctl_and_imports_the_sdk_without_torch_kopf_or_fastapi(light: Venv) -> None:
    assert "usage: tjctl" in checked(light.run("tjctl", "--help"))
    assert __version__ in checked(light.run("tjctl", "--version"))
    imported = light.python("import trainingjob, trainingjob.model, trainingjob_sdk; print(trainingjob.__file__)")
    assert Path(checked(imported).strip()).is_relative_to(light.path)  # the installed copy, not the checkout's
    absent = light.python(f"import importlib.util; print(*(m for m in {NOT_LIGHT!r} if importlib.util.find_spec(m)))")
    assert checked(absent).split() == []
    assert "No module named 'torch'" in light.python("import torch").stderr


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("extra", list(EXTRA_MODULES))
def test_each_extra_brings_what_its_part_imports(install: Installer, extra: str, version: str) -> None:
    venv = install(version, extra)
    checked(venv.python(f"import {', '.join(EXTRA_MODULES[extra])}"))
    assert "No module named 'torch'" in venv.python("import torch").stderr
    assert (venv.path / "bin" / f"trainingjob-{extra}").is_file()


def test_tjctl_run_trains_the_digits_example_from_the_installed_wheel(install: Installer) -> None:
    """`tjctl run examples/digits-ddp.yaml` as the README says, the trainer being the wheel's (the trainer extra)."""
    venv = install("3.11", "trainer")
    for name in ("digits-ddp.yaml", "digits-ddp-checkpoints.yaml"):  # the job, and the claim it names, beside it
        shutil.copy(REPO / "examples" / name, venv.home / name)
    result = venv.run("tjctl", "run", "digits-ddp.yaml", "--workdir", venv.home / "work", timeout=600)
    output = checked(result) + result.stderr
    assert "Succeeded" in output, output
    assert sorted(p.name for p in (venv.home / "work" / "checkpoints").glob("step-*"))[-1] == "step-500"
