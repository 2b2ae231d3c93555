"""One version everywhere: the package's (trainingjob.__version__, which the wheel is named by), the Helm chart's
(its version and appVersion, which default the operator's and the API's image tags) and the newest CHANGELOG entry."""

import re
from pathlib import Path

import pytest
import yaml

from trainingjob import __version__

pytestmark = pytest.mark.fast

REPO = Path(__file__).resolve().parents[2]
SEMVER = re.compile(r"\d+\.\d+\.\d+")


def changelog_versions() -> list[str]:
    """The released versions the changelog's headings name, newest first (an Unreleased heading names none)."""
    text = (REPO / "CHANGELOG.md").read_text()
    return re.findall(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$", text, re.MULTILINE)


def test_the_package_version_is_a_release_version() -> None:
    assert SEMVER.fullmatch(__version__), __version__


def test_the_chart_and_its_app_are_the_package_version() -> None:
    chart = yaml.safe_load((REPO / "charts" / "trainingjob-operator" / "Chart.yaml").read_text())
    assert (str(chart["version"]), str(chart["appVersion"])) == (__version__, __version__)


def test_the_newest_changelog_entry_is_the_package_version() -> None:
    versions = changelog_versions()
    assert versions and versions[0] == __version__, versions
    newest_first = sorted(versions, key=lambda v: tuple(map(int, v.split("."))), reverse=True)
    assert versions == newest_first


def test_each_changelog_entry_has_its_link() -> None:
    text = (REPO / "CHANGELOG.md").read_text()
    assert [v for v in changelog_versions() if f"\n[{v}]: " not in text] == []
