"""The suite's house rules, read from the files (their syntax trees), not run: every test file names exactly one
tier in a module-level `pytestmark` and no tier on a test or class; no module under tests/ imports another test
module or a conftest (shared helpers live in tests/support, tiers in testbed); testbed and bench import nothing
from tests."""

import ast
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

REPO = Path(__file__).resolve().parents[2]
MARKERS = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
TIERS = {marker.split(":")[0] for marker in MARKERS}  # every marker the suite registers is a tier


def _tier(node: ast.expr) -> str | None:
    """The tier a marker expression names (pytest.mark.X or pytest.mark.X(...)), if it names one."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute) and ast.unparse(node.value) == "pytest.mark" and node.attr in TIERS:
        return node.attr
    return None


def tier_problems(source: str) -> list[str]:
    """What is wrong with a test file's tier: none named, several, or one named on a test or class."""
    tree = ast.parse(source)
    named: list[str] = []
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "pytestmark" for target in statement.targets
        ):
            value = statement.value
            marks = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
            named += [tier for mark in marks if (tier := _tier(mark))]
    problems = [] if len(named) == 1 else [f"pytestmark names {len(named)} tiers {named}, not one"]
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            problems += [f"{node.name} is marked {tier}" for d in node.decorator_list if (tier := _tier(d))]
    return problems


def imported(source: str) -> list[str]:
    """Every module a source imports, at any depth (`from a import b` counts as a.b: b may be a module)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names += [f"{node.module}.{alias.name}" for alias in node.names]
    return names


def import_problems(source: str, *, in_tests: bool) -> list[str]:
    """Imports a module may not make: from tests/, anything of tests but tests.support; elsewhere, tests at all;
    anywhere, a conftest."""
    problems = []
    for name in imported(source):
        parts = name.split(".")
        if "conftest" in parts or (parts[0] == "tests" and not (in_tests and parts[1:2] == ["support"])):
            problems.append(f"imports {name}")
    return problems


def _sources(*patterns: str) -> list[Path]:
    return sorted({path for pattern in patterns for path in REPO.glob(pattern)})


def test_every_test_file_names_exactly_one_tier() -> None:
    files = _sources("tests/**/test_*.py")
    assert len(files) > 100
    problems = [f"{f.relative_to(REPO)}: {p}" for f in files for p in tier_problems(f.read_text())]
    assert not problems, "\n".join(problems)


def test_no_test_module_imports_another_and_bench_and_testbed_import_no_tests() -> None:
    in_tests, outside = _sources("tests/**/*.py"), _sources("bench/**/*.py", "testbed/**/*.py")
    assert in_tests and outside
    problems = [
        f"{path.relative_to(REPO)}: {problem}"
        for paths, inside in ((in_tests, True), (outside, False))
        for path in paths
        for problem in import_problems(path.read_text(), in_tests=inside)
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("source", "problems"),
    [
        pytest.param("import pytest\npytestmark = pytest.mark.fast\n", [], id="one tier"),
        pytest.param("pytestmark = [pytest.mark.envtest, pytest.mark.timeout(9)]\n", [], id="one tier and more"),
        pytest.param("import pytest\n", ["pytestmark names 0 tiers [], not one"], id="none"),
        pytest.param(
            "pytestmark = [pytest.mark.fast, pytest.mark.cluster]\n",
            ["pytestmark names 2 tiers ['fast', 'cluster'], not one"],
            id="two",
        ),
        pytest.param(
            "pytestmark = pytest.mark.envtest\n@pytest.mark.cluster\ndef test_x(): pass\n",
            ["test_x is marked cluster"],
            id="another on a test",
        ),
    ],
)
def test_tier_problems_are_found(source: str, problems: list[str]) -> None:
    assert tier_problems(source) == problems


@pytest.mark.parametrize(
    ("source", "in_tests", "problems"),
    [
        pytest.param("from tests.support.builders import at\nfrom testbed import pods\n", True, [], id="support"),
        pytest.param("from tests.unit.test_sdk import x\n", True, ["imports tests.unit.test_sdk.x"], id="test module"),
        pytest.param("from tests import builders\n", True, ["imports tests.builders"], id="tests package"),
        pytest.param("def f():\n    import tests.e2e.test_a\n", True, ["imports tests.e2e.test_a"], id="in a function"),
        pytest.param(
            "from tests.browser.conftest import P\n", True, ["imports tests.browser.conftest.P"], id="conftest"
        ),
        pytest.param(
            "from tests.support.rest_api import World\n",
            False,
            ["imports tests.support.rest_api.World"],
            id="bench importing tests",
        ),
    ],
)
def test_import_problems_are_found(source: str, in_tests: bool, problems: list[str]) -> None:
    assert import_problems(source, in_tests=in_tests) == problems
