"""The real Kueue manager (built from the Go module proxy by scripts/build-kueue.sh) as a process against a control
plane of the tests, with its CRDs installed from the same module. Kueue manages our jobs as an external framework:
the operator makes each queued job's Workload, Kueue admits, preempts and requeues it.

What it runs without: no webhook is registered with the apiserver (its Workload defaulting and ClusterQueue
finalizers are not needed: the tests write every field), no internal certificate management, no leader election,
no visibility server, and no "pod" integration (Kueue must not gate or manage our pods). Its webhook server still
listens (on loopback, with a self-signed certificate in the test's folder), since its readiness check waits for it.

One thing it cannot run without: with internal certificate management off, Kueue v0.17 reads a metrics serving
certificate from the fixed path /etc/kueue/metrics/certs at start (even with metrics off) and exits when there is
none. The harness writes a self-signed pair there when none is present (the tests run as root, as CI does), and
removes what it made once the last Kueue of this machine's tests has stopped: the processes that use the folder
are counted in a state file under a lock, since two test workers may each run one."""

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from testbed.controlplane import ControlPlane, http_ok
from testbed.crds import apply_crd, is_established
from testbed.pki import Authority
from testbed.processes import Server, free_port, poll_until

EXTERNAL_FRAMEWORK = "TrainingJob.v1alpha1.trainingjob.io"
NAMESPACE = "kueue-system"
METRICS_CERTS = Path("/etc/kueue/metrics/certs")
_STARTUP_TIMEOUT = 90.0
_ESTABLISH_TIMEOUT = 60.0


def kueue_folder() -> Path:
    """The folder scripts/build-kueue.sh prints ($TJ_KUEUE_BIN): the `kueue` binary and its crds/. Missing is a
    failure (the cluster tier needs it), never a skip."""
    folder = Path(os.environ.get("TJ_KUEUE_BIN", ""))
    if not os.environ.get("TJ_KUEUE_BIN") or not (folder / "kueue").is_file() or not (folder / "crds").is_dir():
        raise FileNotFoundError(
            f"Kueue not found (TJ_KUEUE_BIN={os.environ.get('TJ_KUEUE_BIN', '')!r}): run `make kueue` (it builds it) "
            "and set TJ_KUEUE_BIN to the folder `bash scripts/build-kueue.sh` prints"
        )
    return folder


def install_crds(api: client.ApiClient, folder: Path) -> None:
    """Create (or replace) Kueue's CRDs as the module ships them, without its conversion webhooks (every client
    here speaks v1beta2, the stored version), and wait until the apiserver serves them."""
    extensions = client.ApiextensionsV1Api(api)
    names = [apply_crd(extensions, yaml.safe_load(p.read_text())) for p in sorted((folder / "crds").glob("*.yaml"))]
    poll_until(
        lambda: all(is_established(extensions, name) for name in names),
        timeout=_ESTABLISH_TIMEOUT,
        what=f"Kueue's CRDs Established: {', '.join(names)}",
    )


def configuration(
    health_port: int, webhook_port: int, cert_dir: Path, pods_ready_timeout: int | None = None
) -> dict[str, Any]:
    """Kueue's Configuration for the tests: TrainingJob as an external framework, batch/job the only built-in one
    (Kueue requires one; it manages only Jobs that name a queue, and the tests make none), no "pod"; with
    `pods_ready_timeout`, waitForPodsReady with that timeout in seconds."""
    pods_ready = {"timeout": f"{pods_ready_timeout}s"} if pods_ready_timeout else None
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "manageJobsWithoutQueueName": False,
        "integrations": {"frameworks": ["batch/job"], "externalFrameworks": [EXTERNAL_FRAMEWORK]},
        "featureGates": {"VisibilityOnDemand": False},
    } | ({"waitForPodsReady": pods_ready} if pods_ready else {})


def _self_signed(folder: Path, stem: str) -> tuple[Path, Path]:
    pair = Authority(folder / "ca").issue(stem, "kueue", server=True)
    return pair.cert, pair.key


_CERTS_STATE = Path(tempfile.gettempdir()) / "tj-kueue-metrics-certs.json"  # {"users": [pid...], "made": folder}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def _certs_state() -> Iterator[dict[str, Any]]:
    """Which test processes use METRICS_CERTS (those that died without saying so dropped) and the folder the
    harness made, under a lock."""
    with open(f"{_CERTS_STATE}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        state = json.loads(_CERTS_STATE.read_text()) if _CERTS_STATE.is_file() else {"users": [], "made": None}
        state["users"] = [pid for pid in state["users"] if _alive(pid)]
        yield state
        if state["users"]:
            _CERTS_STATE.write_text(json.dumps(state))
        else:
            _CERTS_STATE.unlink(missing_ok=True)


def _acquire_metrics_certs() -> None:
    """A self-signed pair at the path Kueue reads at start (see the module's docstring), written only if absent."""
    with _certs_state() as state:
        if not state["users"] and state["made"]:  # made by a run that died: remove it, then make it again
            shutil.rmtree(state["made"], ignore_errors=True)
            state["made"] = None
        state["users"].append(os.getpid())
        if (METRICS_CERTS / "tls.crt").is_file() and (METRICS_CERTS / "tls.key").is_file():
            return
        missing = [p for p in (METRICS_CERTS, *METRICS_CERTS.parents) if not p.exists()]
        state["made"] = state["made"] or (str(missing[-1]) if missing else None)
        METRICS_CERTS.mkdir(parents=True, exist_ok=True)
        cert, key = _self_signed(METRICS_CERTS / ".issuer", "metrics")
        (METRICS_CERTS / "tls.crt").write_bytes(cert.read_bytes())
        (METRICS_CERTS / "tls.key").write_bytes(key.read_bytes())


def _release_metrics_certs() -> None:
    """The last user gone, what the harness made is removed: the machine is left as it was found."""
    with _certs_state() as state:
        if os.getpid() in state["users"]:
            state["users"].remove(os.getpid())
        if not state["users"] and state["made"]:
            shutil.rmtree(state["made"], ignore_errors=True)


class KueueProcess:
    """One Kueue manager against `plane`, its files (configuration, webhook certificate, log) in `root`."""

    def __init__(self, plane: ControlPlane, root: Path, folder: Path, pods_ready_timeout: int | None = None) -> None:
        self.plane, self.root, self.folder = plane, root, folder
        self.pods_ready_timeout = pods_ready_timeout
        self.server: Server | None = None
        self.certs_held = False

    def start(self) -> None:
        _acquire_metrics_certs()
        self.certs_held = True
        self.root.mkdir(parents=True, exist_ok=True)
        cert_dir = self.root / "webhook-certs"
        cert_dir.mkdir(exist_ok=True)
        cert, key = _self_signed(self.root / "webhook-pki", "webhook")
        (cert_dir / "tls.crt").write_bytes(cert.read_bytes())
        (cert_dir / "tls.key").write_bytes(key.read_bytes())
        health = free_port()
        config = self.root / "kueue-config.yaml"
        config.write_text(yaml.safe_dump(configuration(health, free_port(), cert_dir, self.pods_ready_timeout)))
        argv = [str(self.folder / "kueue"), f"--config={config}", f"--visibility-server-port={free_port()}"]
        self.server = Server("kueue", argv, self.root, env={"KUBECONFIG": str(self.plane.kubeconfig)})
        self.server.wait_ready(lambda: http_ok(f"http://127.0.0.1:{health}/readyz"), _STARTUP_TIMEOUT)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None
        if self.certs_held:
            _release_metrics_certs()
            self.certs_held = False

    def log(self) -> str:
        return self.server.log_path.read_text(errors="replace") if self.server else ""


@contextlib.contextmanager
def kueue_running(plane: ControlPlane, root: Path, *, pods_ready_timeout: int | None = None) -> Iterator[KueueProcess]:
    """Kueue's CRDs installed on `plane` and its manager running until the block ends (stopped by process group);
    with `pods_ready_timeout`, Kueue evicts a Workload whose PodsReady is not true that long after admission."""
    folder = kueue_folder()
    with plane.api_client() as api:
        install_crds(api, folder)
        core = client.CoreV1Api(api)
        with contextlib.suppress(client.ApiException):
            core.create_namespace({"metadata": {"name": NAMESPACE}})
    process = KueueProcess(plane, root, folder, pods_ready_timeout)
    try:
        process.start()
        yield process
    finally:
        process.stop()
