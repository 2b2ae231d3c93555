"""The images' hash-locked requirements (`make locks`) agree with uv.lock: every package each image needs, at uv.lock's
version, with exactly uv.lock's hashes, and nothing else; and the trainer's lock holds every distribution the
trainer imports."""

import ast
import importlib.metadata
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from testbed.image_locks import LOCKS, ImageLock, drift, locked_packages, normalized, pinned

pytestmark = pytest.mark.fast

REPO = Path(__file__).resolve().parents[2]
PACKAGES = locked_packages((REPO / "uv.lock").read_text())
TRAINER = next(lock for lock in LOCKS if lock.image == "trainer")


@pytest.mark.parametrize("lock", LOCKS, ids=[lock.image for lock in LOCKS])
def test_each_image_lock_is_what_uv_lock_pins(lock: ImageLock) -> None:
    text = (REPO / lock.path).read_text()
    assert drift(text, PACKAGES, lock) == [], "run `make locks`"
    assert "`make locks`" in text.splitlines()[0]


def _with_line(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


TORCH = f"torch=={PACKAGES['torch']['version']}"
TORCH_HASH = PACKAGES["torch"]["wheels"][0]["hash"]
# (id, how the committed trainer lock is changed, the problem drift must name)
TAMPERED: list[tuple[str, Callable[[str], str], str]] = [
    ("older version", lambda t: _with_line(t, f"{TORCH} ", "torch==2.0.0 "), "torch: "),
    ("hash dropped", lambda t: _with_line(t, f"--hash={TORCH_HASH}", ""), "torch: "),
    ("hash replaced", lambda t: _with_line(t, f"--hash={TORCH_HASH}", "--hash=sha256:" + "0" * 64), "torch: "),
    ("package dropped", lambda t: _with_line(t, f"{TORCH} ", "# "), "torch: not in"),
    ("package added", lambda t: t + "kubernetes==37.0.0 --hash=sha256:" + "1" * 64 + "\n", "kubernetes: in"),
]


@pytest.mark.parametrize(("change", "named"), [(c, n) for _, c, n in TAMPERED], ids=[i for i, _, _ in TAMPERED])
def test_drift_names_a_lock_that_uv_lock_does_not_back(change: Callable[[str], str], named: str) -> None:
    text = (REPO / TRAINER.path).read_text()
    problems = drift(change(text), PACKAGES, TRAINER)
    assert len(problems) == 1 and problems[0].startswith(named), problems


def third_party_imports(sources: list[Path], own: str) -> set[str]:
    """The top-level modules the sources import that are neither the standard library's nor their own package."""
    modules: set[str] = set()
    for source in sources:
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                modules.add(node.module.split(".")[0])
    return modules - set(sys.stdlib_module_names) - {own}


def test_the_trainer_lock_holds_every_distribution_the_trainer_imports() -> None:
    modules = third_party_imports(sorted((REPO / "trainer-image" / "trainer").rglob("*.py")), "trainer")
    providers = importlib.metadata.packages_distributions()  # this venv has every extra installed
    assert {"torch", "numpy", "sklearn", "pydantic"} <= modules  # the reading of the imports works
    assert not modules - providers.keys(), "no installed distribution provides these"
    needed = {normalized(d) for m in modules for d in providers[m]}
    assert needed <= pinned((REPO / TRAINER.path).read_text()).keys()
