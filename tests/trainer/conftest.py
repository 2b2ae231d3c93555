"""Fixtures for the trainer tests: a log folder per test that is printed when the test fails."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from testbed.trainer_procs import Pod, pods_cleanup


@pytest.fixture
def pods() -> Iterator[list[Pod]]:
    """Pods a test starts; whatever is still running at the end is killed."""
    with pods_cleanup() as started:
        yield started


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    """Where the pods of one test write their logs."""
    path = tmp_path / "logs"
    path.mkdir()
    return path
