"""A pod of local mode: a process, and the pod manifest the planner sees for it (status read off the process)."""

import contextlib
import copy
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trainingjob.children.agent import READY_PATH
from trainingjob.kube.progress import read_bounded

LOOPBACK = "127.0.0.1"


def process_tree(root: int) -> list[int]:
    """`root` and every process under it, parents first (from /proc: a process gone meanwhile is left out)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(parent, []).append(int(entry.name))
    found, queue = [], [root]
    while queue:
        found.append(queue.pop(0))
        queue += children.get(found[-1], [])
    return found


Manifest = dict[str, Any]


@contextlib.contextmanager
def interrupt_deferred() -> Iterator[None]:
    """Hold a Ctrl-C (SIGINT) until the block ends, then raise it: a pod's process started in the block is on the
    record before the interrupt stops the run (and the run's end stops every recorded pod). Off the main thread,
    where Python delivers no signal, the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if held:
        signal.raise_signal(signal.SIGINT)  # as it would have been, now the block is done


def now_stamp() -> str:
    """Now, as the API writes times."""
    return datetime.now(UTC).isoformat()


@dataclass
class LocalPod:
    """A pod as a local process: its manifest, the process and where its log and progress go."""

    manifest: Manifest
    process: subprocess.Popen[bytes]
    log_path: Path
    progress_path: Path
    deleted_at: float | None = None
    finished_at: str | None = None
    ready_port: int | None = None  # rank 0's agent: Ready as its readiness probe says, as the kubelet would

    def __post_init__(self) -> None:
        threading.Thread(target=self._stamp_exit, name=f"wait {self.name}", daemon=True).start()

    def _stamp_exit(self) -> None:
        """Note when the process ended, as the kubelet does, so the first rank to die is known."""
        self.process.wait()
        self.finished_at = now_stamp()

    @property
    def name(self) -> str:
        return str(self.manifest["metadata"]["name"])

    @property
    def uid(self) -> str:
        return str(self.manifest["metadata"]["uid"])

    def as_manifest(self) -> Manifest:
        """The pod as the API would show it, with a status read off the process."""
        pod = copy.deepcopy(self.manifest)
        code = self.process.poll()
        if code is None:
            ready = "True" if self._ready() else "False"
            pod["status"] = {"phase": "Running", "podIP": LOOPBACK, "conditions": [{"type": "Ready", "status": ready}]}
        else:
            exit_code = code if code >= 0 else 128 - code
            reason = "Completed" if code == 0 else "Error"
            terminated = {"exitCode": exit_code, "reason": reason, "finishedAt": self.finished_at or now_stamp()}
            container = {"name": self.manifest["spec"]["containers"][0]["name"], "state": {"terminated": terminated}}
            phase = "Succeeded" if code == 0 else "Failed"
            pod["status"] = {"phase": phase, "containerStatuses": [container]}
        if self.deleted_at is not None:
            pod["metadata"]["deletionTimestamp"] = now_stamp()
        return pod

    def _ready(self) -> bool:
        if self.ready_port is None:
            return True
        return read_bounded(LOOPBACK, self.ready_port, READY_PATH, 1024, 1.0) is not None

    def processes(self) -> list[int]:
        """The pod's process and every process under it (its agent's trainer and spare), parents first."""
        return process_tree(self.process.pid)

    def stopped_process(self) -> int | None:
        """A process of the pod that stopped itself (SIGSTOP: local mode's --kill), if one did."""
        for pid in self.processes():
            with contextlib.suppress(OSError, IndexError):
                if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T":
                    return pid
        return None

    def signal_all(self, signal: int) -> None:
        """Signal the pod's processes, its agent's children too (they run in sessions of their own)."""
        for pid in self.processes():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal)
