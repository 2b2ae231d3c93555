"""Runs the docs' commands (tests/support/doc_commands.py) as a person types them into one terminal.

From a view of the repository (a folder of links to its top-level entries: the docs' relative paths work there,
and what the commands write, `.tjctl/`, `ca.crt`, `.dev/`, stays in the test's folder). Each command runs in a
bash of its own, in its own process group, after the assignments typed before it (`TOKEN=$(...)`, `export ...`).
The one substitution: the docs' local port 8000 is a free port here (the machine is shared)."""

import os
import re
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml
from testbed.processes import free_port, poll_until
from tests.support.doc_commands import REPO, DocCommand, Run, how

_NOT_IN_VIEW = {".git", ".dev", ".demo-cluster", ".tjctl", ".artifacts", "dist", "build", "ca.crt"}
# What a terminal keeps for the commands after it: `export A=x B=y`, `NAME=value`, `NAME=$(command)`.
_ASSIGNMENT = re.compile(r"export\s.*|[A-Za-z_]\w*=(\S*|\$\(.*\))")
DOC_PORT = "8000"


def checkout_view(folder: Path) -> Path:
    """`folder`, holding a link to each top-level entry of the repository (runtime folders left out)."""
    folder.mkdir(parents=True, exist_ok=True)
    for entry in REPO.iterdir():
        if entry.name not in _NOT_IN_VIEW and not entry.name.endswith("_cache"):
            (folder / entry.name).symlink_to(entry)
    return folder


def dev_kubeconfig(view: Path, kubeconfig: Path, namespace: str) -> Path:
    """`kubeconfig` as the view's `.dev/kubeconfig` (the docs' cluster), its context in `namespace`."""
    document = yaml.safe_load(kubeconfig.read_text())
    for context in document["contexts"]:
        context["context"]["namespace"] = namespace
    path = view / ".dev" / "kubeconfig"
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump(document))
    return path


def environment(view: Path, **values: str) -> dict[str, str]:
    """A person's terminal: their PATH (plus a `tjctl`, the checkout's, and the control plane's helm), no
    kubeconfig or tjctl settings of theirs, helm's folders in the view."""
    tools = view / ".tools"
    tools.mkdir(exist_ok=True)
    (tools / "tjctl").symlink_to(REPO / "bin" / "tjctl")
    binaries = os.environ.get("TJ_CONTROLPLANE_BIN", "")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TJCTL_", "KUBECONFIG", "HELM_"))}
    env.update(
        PATH=f"{tools}:{binaries}:{os.environ['PATH']}",
        KUBECONFIG=str(view / "no-kubeconfig"),  # a command that needs a cluster names or exports its own
        HELM_CACHE_HOME=str(view / ".helm" / "cache"),
        HELM_CONFIG_HOME=str(view / ".helm" / "config"),
        HELM_DATA_HOME=str(view / ".helm" / "data"),
        COLUMNS="200",
    )
    env.update(values)
    return env


class Terminal:
    """One person's terminal over a view: commands in order; the ones that serve stay up until close()."""

    def __init__(self, view: Path, env: dict[str, str]) -> None:
        self.view = view
        self.env = env
        self.port = str(free_port())
        self.env.setdefault("TJ_API_PORT", self.port)  # `make run-api` serves on the docs' 8000: here, on ours
        self.typed: list[str] = []  # the assignments so far
        self.serving: list[subprocess.Popen[bytes]] = []
        self.undo: list[str] = []
        self.ran = 0

    def run(self, command: DocCommand, rule: Run | None = None) -> str:
        """Run `command` as its rule says (the table's, unless given); its output. AssertionError on failure."""
        found = rule or how(command)
        assert isinstance(found, Run), f"{command} is not run by any rule"
        rule = found
        text = re.sub(rf"\b{DOC_PORT}\b", self.port, command.text)
        log = self.view / ".logs" / f"{self.ran:02d}.log"
        log.parent.mkdir(exist_ok=True)
        self.ran += 1
        if rule.undo and rule.undo not in self.undo:
            self.undo.append(rule.undo)
        process = self._start(text, log)
        output = self._wait(command, rule, process, log)
        if _ASSIGNMENT.fullmatch(text):
            self.typed.append(text)
        return output

    def _start(self, text: str, log: Path) -> "subprocess.Popen[bytes]":
        script = "\n".join(["set -eo pipefail", *self.typed, text])
        with log.open("wb") as out:
            return subprocess.Popen(
                ["bash", "-c", script], cwd=self.view, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip

    def _wait(self, command: DocCommand, rule: Run, process: "subprocess.Popen[bytes]", log: Path) -> str:
        wanted = rule.until or rule.serves

        def settled() -> bool:
            seen = bool(wanted) and re.search(wanted, log.read_text(errors="replace")) is not None
            return seen or process.poll() is not None

        try:
            poll_until(settled, timeout=rule.timeout, interval=0.2, what=f"`{command.text}`")
        except TimeoutError:
            _stop(process)
            raise AssertionError(f"{command}\ndid not end in {rule.timeout:.0f} s:\n{_tail(log)}") from None
        output = log.read_text(errors="replace")
        if rule.serves and process.poll() is None:
            self.serving.append(process)
            return output
        if rule.until and re.search(rule.until, output):
            _stop(process)
            return output
        assert process.returncode == 0, f"{command}\nexited {process.returncode}:\n{_tail(log)}"
        assert re.search(rule.expect, output), f"{command}\nprinted no /{rule.expect}/:\n{_tail(log)}"
        return output

    def stop_serving(self) -> None:
        """Stop what serves in the background (a port-forward), as Ctrl-C in its terminal would."""
        for process in self.serving:
            _stop(process)
        self.serving.clear()

    def close(self) -> None:
        self.stop_serving()
        for text in self.undo:
            subprocess.run(["bash", "-c", text], cwd=self.view, env=self.env, capture_output=True, check=False)


@contextmanager
def terminal(view: Path, **values: str) -> Iterator[Terminal]:
    shell = Terminal(view, environment(view, **values))
    try:
        yield shell
    finally:
        shell.close()


def _stop(process: "subprocess.Popen[bytes]") -> None:
    """SIGTERM the command's process group (a port-forward, `make run-api` and its server) and reap it."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _tail(log: Path, lines: int = 40) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
