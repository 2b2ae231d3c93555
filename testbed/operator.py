"""The operator as the tests run it: `python -m trainingjob` in its own process group, against a kubeconfig."""

import contextlib
import os
import re
import secrets
import signal
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from testbed.processes import Server, free_port

REPO = Path(__file__).resolve().parents[1]


class OperatorProcess:
    """Starts, kills and restarts the real operator process."""

    def __init__(self, kubeconfig: Path, log_dir: Path, **settings: str) -> None:
        self.kubeconfig, self.log_dir = kubeconfig, log_dir
        self.metrics_port = free_port()
        # The operator's key, from which a test derives a job's key: text, as the chart draws it. (Random bytes
        # were not: the operator strips the file's surrounding whitespace, and about one key in twenty begins or
        # ends with a whitespace byte, so the test's job key and the operator's differed and every order was refused.)
        self.key = secrets.token_hex(24).encode()
        log_dir.mkdir(parents=True, exist_ok=True)
        key_file = log_dir / "operator.key"
        key_file.write_bytes(self.key)
        self.env = {
            "KUBECONFIG": str(kubeconfig),
            "PYTHONPATH": os.pathsep.join(str(REPO / p) for p in ("operator", "api", "trainer-image", ".")),
            "TJ_OPERATOR_METRICS_PORT": str(self.metrics_port),
            "TJ_OPERATOR_BACKOFF_BASE_SECONDS": "0.5",
            "TJ_OPERATOR_BACKOFF_MAX_SECONDS": "2",
            "TJ_OPERATOR_RESYNC_SECONDS": "5",
            "TJ_OPERATOR_READ_PROGRESS": "true",
            "TJ_OPERATOR_KEY_FILE": str(key_file),
            **settings,
        }
        self.server: Server | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        self.server = Server(f"operator-{self.starts}", [sys.executable, "-m", "trainingjob"], self.log_dir, self.env)

    def kill(self) -> None:
        """SIGKILL: no chance to clean up, as when a node dies under the operator."""
        if self.server is not None:
            os.killpg(self.server.process.pid, signal.SIGKILL)
            self.server.process.wait(timeout=10)
            self.server.stop()
            self.server = None

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def log_tail(self) -> str:
        return self.server.log_tail(60) if self.server else ""

    def log(self) -> str:
        return self.server.log_path.read_text(errors="replace") if self.server else ""

    def reconciles(self) -> int:
        """How many reconciles this process has finished (its /metrics), or -1 while it does not answer."""
        return int(self.metric("trainingjob_reconcile_duration_seconds_count"))

    def metric(self, series: str) -> float:
        """One series of its /metrics, e.g. 'trainingjob_cache_relists_total{resource="pods"}': 0 when absent,
        -1 while it does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=2) as response:
                text = response.read().decode()
        except OSError:
            return -1
        found = re.search(rf"^{re.escape(series)} (\S+)$", text, re.MULTILINE)
        return float(found.group(1)) if found else 0


@contextlib.contextmanager
def operator_running(kubeconfig: Path, **settings: str) -> Iterator[OperatorProcess]:
    """The operator started with these TJ_OPERATOR_* settings, its log in a temporary folder, stopped after."""
    with tempfile.TemporaryDirectory(prefix="tj-operator-") as logs:
        process = OperatorProcess(kubeconfig, Path(logs), **settings)
        process.start()
        try:
            yield process
        finally:
            process.stop()
