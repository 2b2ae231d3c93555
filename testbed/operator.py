"""The operator as the tests run it: `python -m trainingjob` in its own process group, against a kubeconfig."""

import contextlib
import os
import re
import secrets
import signal
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from kubernetes import client

from testbed.processes import Server, free_port, poll_until
from trainingjob.kube.client import connect

REPO = Path(__file__).resolve().parents[1]
SCRAPER = ("kube-system", "tj-test-scraper")  # a ServiceAccount allowed `get /metrics`, as Prometheus' is


def scraper_token(kubeconfig: Path) -> str:
    """A token of a ServiceAccount that may GET /metrics (the chart's metrics-reader rule), for the Kubernetes API's
    own audience as Prometheus' token is; made, with what it needs, by whoever `kubeconfig` is (an admin)."""
    namespace, name = SCRAPER
    with connect(kubeconfig).api as api:
        core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
        role = client.V1ClusterRole(
            metadata={"name": name}, rules=[client.V1PolicyRule(non_resource_urls=["/metrics"], verbs=["get"])]
        )
        subject = client.RbacV1Subject(kind="ServiceAccount", name=name, namespace=namespace)
        ref = client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=name)
        binding = client.V1ClusterRoleBinding(metadata={"name": name}, role_ref=ref, subjects=[subject])
        for create, body in (
            (lambda b: core.create_namespaced_service_account(namespace, b), {"metadata": {"name": name}}),
            (rbac.create_cluster_role, role),
            (rbac.create_cluster_role_binding, binding),
        ):
            try:
                create(body)
            except client.ApiException as error:
                if error.status != 409:  # made by an earlier operator of the run
                    raise
        request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[]))
        return str(core.create_namespaced_service_account_token(name, namespace, request).status.token)


class OperatorProcess:
    """Starts, kills and restarts the real operator process. Its /metrics is read with a token that may (made
    with `admin`, an admin's kubeconfig: the operator's own when not given)."""

    def __init__(self, kubeconfig: Path, log_dir: Path, admin: Path | None = None, /, **settings: str) -> None:
        self.kubeconfig, self.log_dir, self.admin = kubeconfig, log_dir, admin or kubeconfig
        self._token = ""
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
        """The end of its log, after every thread's stack when it still runs (SIGUSR1: what a stuck operator is
        doing, for the test that found it stuck)."""
        if self.server is None:
            return ""
        if self.server.process.poll() is None:
            dumps = self.server.log_path.read_text(errors="replace").count("Current thread") + 1
            os.kill(self.server.process.pid, signal.SIGUSR1)
            with contextlib.suppress(TimeoutError):
                poll_until(lambda: self.log().count("Current thread") >= dumps, timeout=5, what="a stack dump")
        return self.server.log_tail(200)

    def log(self) -> str:
        return self.server.log_path.read_text(errors="replace") if self.server else ""

    def reconciles(self) -> int:
        """How many reconciles this process has finished (its /metrics), or -1 while it does not answer."""
        return int(self.metric("trainingjob_reconcile_duration_seconds_count"))

    def scrape(self, path: str = "/metrics", timeout: float = 5) -> tuple[int, str]:
        """(status, body) of a GET on its metrics port, with a token that may read /metrics; OSError while it does
        not answer."""
        self._token = self._token or scraper_token(self.admin)
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.metrics_port}{path}", headers={"Authorization": f"Bearer {self._token}"}
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def metric(self, series: str) -> float:
        """One series of its /metrics, e.g. 'trainingjob_cache_relists_total{resource="pods"}': 0 when absent,
        -1 while it does not answer."""
        try:
            status, text = self.scrape(timeout=2)
        except OSError:
            return -1
        if status != 200:
            return -1
        found = re.search(rf"^{re.escape(series)} (\S+)$", text, re.MULTILINE)
        return float(found.group(1)) if found else 0


@contextlib.contextmanager
def operator_running(kubeconfig: Path, admin: Path | None = None, /, **settings: str) -> Iterator[OperatorProcess]:
    """The operator started with these TJ_OPERATOR_* settings, its log in a temporary folder, stopped after; `admin`
    as OperatorProcess takes it."""
    # The Lease in `default` unless the test says: an operator left to find one would defer to an earlier test's
    # (a chart test's, in a namespace deleted after it), and share that test's fate.
    settings = {"TJ_OPERATOR_LEASE_NAMESPACE": "default", **settings}
    with tempfile.TemporaryDirectory(prefix="tj-operator-") as logs:
        process = OperatorProcess(kubeconfig, Path(logs), admin, **settings)
        process.start()
        try:
            yield process
        finally:
            process.stop()
