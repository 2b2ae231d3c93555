"""docs/architecture.md stays true: every file or folder it names exists, it names every package of the operator,
and its table names the file of every planner policy."""

import re
from pathlib import Path

import pytest

from trainingjob.plan import POLICIES

pytestmark = pytest.mark.fast

REPO = Path(__file__).resolve().parents[2]
DOC = (REPO / "docs" / "architecture.md").read_text()
PACKAGE = REPO / "operator" / "trainingjob"
ROOTS = ("operator/", "api/", "trainer-image/", "tests/", "testbed/", "bench/", "charts/", "crds/", "docs/")


def named_paths() -> list[str]:
    """Every `code` span that is a path of the repository (it starts at one of its top folders)."""
    return sorted({span for span in re.findall(r"`([^`\s]+)`", DOC) if span.startswith(ROOTS)})


def test_every_path_it_names_exists() -> None:
    missing = [path for path in named_paths() if not (REPO / path).exists()]
    assert named_paths() and not missing, missing


def test_it_names_every_package_of_the_operator() -> None:
    packages = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
    assert [name for name in packages if f"`{name}/`" not in DOC] == []


def test_it_names_the_file_of_every_planner_policy() -> None:
    files = {f"operator/trainingjob/plan/{policy.__module__.rsplit('.', 1)[1]}.py" for _, policy in POLICIES}
    assert sorted(file for file in files if f"`{file}`" not in DOC) == []
