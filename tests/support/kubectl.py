"""`kubectl get` as a person reads it: each row's cells under their column headers."""

import re
import subprocess
from pathlib import Path


def kubectl(kubeconfig: Path, *args: str) -> str:
    """kubectl's output; an AssertionError with its stderr when it fails."""
    done = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True, timeout=30, check=False
    )
    if done.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} exited {done.returncode}: {done.stderr}")
    return done.stdout


def table(output: str) -> list[dict[str, str]]:
    """The rows of a `kubectl get` table by column name, an unset field's cell "". A cell is read under its
    header, not split on spaces: kubectl leaves such a cell blank (older versions print <none>)."""
    header, *lines = output.splitlines()
    starts = [match.start() for match in re.finditer(r"\S+", header)]
    bounds = list(zip(header.split(), starts, [*starts[1:], None], strict=True))
    return [{name: _cell(line[a:b]) for name, a, b in bounds} for line in lines]


def _cell(text: str) -> str:
    cell = text.strip()
    return "" if cell == "<none>" else cell
