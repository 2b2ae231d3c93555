"""tjctl as a person runs it: `python -m tjctl` in a process of its own, with the checkout's packages and none of
the caller's Kubernetes settings."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def tjctl_env(**overrides: str) -> dict[str, str]:
    """The environment tjctl runs in: the checkout's packages, no $KUBECONFIG or $TJCTL_* of the caller's."""
    env_path = ":".join(str(REPO / p) for p in ("operator", "api", "trainer-image", "."))
    base = {"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "COLUMNS": "200"}
    return {**base, "PYTHONUNBUFFERED": "1", **overrides}


def tjctl(
    *args: str, cwd: Path = REPO, timeout: float = 300, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m tjctl ARGS`, to its end; `env` adds to (or overrides) tjctl_env()."""
    return subprocess.run(
        [sys.executable, "-m", "tjctl", *args],
        cwd=cwd,
        env=tjctl_env(**(env or {})),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
