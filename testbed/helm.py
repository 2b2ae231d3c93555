"""The helm binary of the control plane ($TJ_CONTROLPLANE_BIN/helm) for tests: lint, template, install, uninstall."""

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from testbed.controlplane import Binaries

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "charts" / "trainingjob-operator"
Manifest = dict[str, Any]
_TIMEOUT = 120.0


class HelmError(RuntimeError):
    """helm exited with a non-zero code; the message holds its stderr."""


def _flags(values: Mapping[str, str]) -> list[str]:
    """`--set-string`-free `--set` flags; the values are helm's own syntax (lists as {a,b})."""
    return [flag for key, value in values.items() for flag in ("--set", f"{key}={value}")]


class Helm:
    """helm with its cache, config and data folders in `home`, so tests leave nothing in the user's."""

    def __init__(self, home: Path, chart: Path = CHART) -> None:
        self.binary = Binaries.from_environment().path("helm")
        self.chart = chart
        self.env = {
            "HOME": str(home),
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
            "PATH": "/usr/bin:/bin",
        }

    def run(self, *args: str) -> str:
        done = subprocess.run(
            [str(self.binary), *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=_TIMEOUT,
            check=False,
        )
        if done.returncode != 0:
            raise HelmError(f"helm {' '.join(args)} exited with {done.returncode}:\n{done.stderr}{done.stdout}")
        return done.stdout

    def lint(self, values: Mapping[str, str] | None = None) -> str:
        return self.run("lint", "--strict", str(self.chart), *_flags(values or {}))

    def template(
        self,
        release: str,
        namespace: str,
        values: Mapping[str, str] | None = None,
        show_only: Sequence[str] = (),
        include_crds: bool = False,
    ) -> list[Manifest]:
        """The rendered objects, in helm's install order."""
        args = ["template", release, str(self.chart), "--namespace", namespace, *_flags(values or {})]
        args += [flag for path in show_only for flag in ("--show-only", path)]
        if include_crds:
            args.append("--include-crds")
        return [doc for doc in yaml.safe_load_all(self.run(*args)) if doc]

    def install(self, release: str, namespace: str, kubeconfig: Path, values: Mapping[str, str] | None = None) -> str:
        return self.run(
            "install", release, str(self.chart), "--namespace", namespace, "--kubeconfig", str(kubeconfig),
            *_flags(values or {}),
        )  # fmt: skip

    def uninstall(self, release: str, namespace: str, kubeconfig: Path) -> str:
        return self.run("uninstall", release, "--namespace", namespace, "--kubeconfig", str(kubeconfig), "--wait")
