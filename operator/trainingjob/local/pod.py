"""A pod of local mode: a process, and the pod manifest the planner sees for it (status read off the process)."""

import copy
import subprocess
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

Manifest = dict[str, Any]


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

    def __post_init__(self) -> None:
        threading.Thread(target=self._stamp_exit, name=f"wait {self.name}", daemon=True).start()

    def _stamp_exit(self) -> None:
        """Note when the process ended, as the kubelet does, so the first rank to die is known."""
        self.process.wait()
        self.finished_at = now_stamp()

    @property
    def name(self) -> str:
        return str(self.manifest["metadata"]["name"])

    def as_manifest(self) -> Manifest:
        """The pod as the API would show it, with a status read off the process."""
        pod = copy.deepcopy(self.manifest)
        code = self.process.poll()
        if code is None:
            pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
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
