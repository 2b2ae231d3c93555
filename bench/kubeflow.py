"""Kubeflow's training-operator (v1, the PyTorchJob controller) as a baseline for the benchmarks: built from the Go
module proxy by scripts/build-kubeflow.sh and run as a plain process on this machine, out of cluster, against a
test control plane's kubeconfig.

How it runs (the flags are the v1 manager's own, cmd/training-operator.v1 of the pinned module):

    training-operator --kubeconfig=KUBECONFIG --enable-scheme=pytorchjob --leader-elect=false
        --metrics-bind-address=127.0.0.1:FREE --health-probe-bind-address=127.0.0.1:FREE
        --webhook-server-port=FREE --controller-threads=THREADS
        [--kube-api-qps=QPS --kube-api-burst=BURST] [--zap-log-level=LEVEL]
    environment: MY_POD_NAMESPACE=kubeflow (where it keeps its webhook certificate Secret)

- Only the PyTorchJob scheme: without --enable-scheme it starts all five controllers (TF, PyTorch, XGBoost,
  Paddle, JAX), each with its own watches and its own CRD to install.
- Leader election off (its default too): one replica. Metrics and health probes on free loopback ports.
- RBAC: none installed; it runs with the kubeconfig it is given (the control plane's admin, system:masters).
- Client rate limit: the binary always installs a token-bucket limiter from --kube-api-qps/--kube-api-burst, whose
  defaults are 20 and 30; `qps=None`/`burst=None` leave those defaults. Both flags are integers: qps is rounded.
  UNTHROTTLED_QPS/UNTHROTTLED_BURST are far above what one process on this machine can send.
- No gang scheduler (--gang-scheduler-name unset): the plain default scheduler, and no PodGroup watches (they are
  set up only when the volcano or scheduler-plugins PodGroup CRD is served). No CRD but PyTorchJob is needed.
- Logging: the binary's defaults (zap development mode, debug level) unless `log_level` is given.
- The webhook server cannot be turned off, and certificate rotation (open-policy-agent's cert-controller) has no
  flag to disable it: the controllers are registered only after the rotator reports the certificates ready. In a
  cluster the rotator fills the Secret `training-operator-webhook-cert` in MY_POD_NAMESPACE and the kubelet mounts
  that Secret at /tmp/k8s-webhook-server/serving-certs, a path fixed in the binary. Out of cluster, start() does
  both halves: it creates the namespace and an empty Secret (as the standalone manifests do), then, once the
  rotator has written the Secret, copies tls.crt, tls.key and ca.crt into that folder, as the kubelet would. The
  rotator also injects the CA into the ValidatingWebhookConfiguration `validator.training-operator.kubeflow.org`;
  none is created (a missing one is logged and skipped), because the apiserver could not reach the webhook: there
  is no Service in front of this process. So PyTorchJobs are not validated by Kubeflow's webhook, and the
  webhook server (TLS, on a free port on all addresses: the binary has no host flag) serves nobody. The folder is
  removed on stop(); start() refuses to run if it exists already (another instance, or a leftover).
- start() returns when /readyz answers 200 (certificates ready, webhook server listening) and the PyTorchJob
  controller has logged "Starting workers" (its informers have synced); that log line is at info level, so with a
  `log_level` that hides info lines start() waits for /readyz only.
- Per job it creates one pod and one headless Service per replica (Services too count against its rate limit).
- Kubeflow adds to each Worker pod an init container (alpine, waits for the Master's DNS name); kwok does not run
  containers, so it changes nothing but the pod spec.

`process_usage(pid)` reads a process's CPU time and peak RSS from /proc, for this binary and for our operator alike.
"""

import base64
import contextlib
import os
import shutil
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config
from testbed.processes import Server, free_port, poll_until

REPO = Path(__file__).resolve().parents[1]
BINARY = "training-operator"
CRD_FILE = "kubeflow.org_pytorchjobs.yaml"
CRD_NAME = "pytorchjobs.kubeflow.org"
GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "pytorchjobs"
# Fixed in the binary (pkg/cert): where the rotator expects the Secret mounted and the webhook server reads it.
CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")
CERT_SECRET = "training-operator-webhook-cert"
CERT_FILES = ("tls.crt", "tls.key", "ca.crt")
UNTHROTTLED_QPS = 100_000.0
UNTHROTTLED_BURST = 100_000
_READY_TIMEOUT = 120.0
_ESTABLISH_TIMEOUT = 60.0


def build() -> Path:
    """Build (or reuse) the pinned training-operator; the folder holding the binary and the PyTorchJob CRD."""
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "build-kubeflow.sh")], check=True, stdout=subprocess.PIPE, text=True
    )
    return Path(done.stdout.strip().splitlines()[-1])


@dataclass(frozen=True)
class ProcessUsage:
    cpu_seconds: float  # user + system time of all its threads so far
    peak_rss_bytes: int  # VmHWM: the resident set's high-water mark


def process_usage(pid: int) -> ProcessUsage:
    """CPU time and peak RSS of a live process, from /proc/<pid>/stat and /proc/<pid>/status."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": fields 3.. of proc(5)
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    peak = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            peak = int(line.split()[1]) * 1024  # reported in kB
    return ProcessUsage(ticks / os.sysconf("SC_CLK_TCK"), peak)


class KubeflowOperator:
    """The training-operator binary out of cluster, PyTorchJob only, in its own process group (see the module
    docstring for the exact command). cpu_seconds() and peak_rss_bytes() read it while it runs, and keep the last
    values read (just before stop() signals it) afterwards."""

    def __init__(
        self,
        kubeconfig: Path,
        log_dir: Path,
        *,
        qps: float | None,
        burst: int | None,
        threads: int,
        log_level: str | None = None,
        namespace: str = "kubeflow",
        folder: Path | None = None,
    ) -> None:
        self.kubeconfig, self.log_dir, self.namespace = kubeconfig, log_dir, namespace
        self.folder = folder
        self.qps, self.burst, self.threads, self.log_level = qps, burst, threads, log_level
        self.metrics_port = self.probe_port = self.webhook_port = 0
        self.server: Server | None = None
        self.startup_seconds = 0.0
        self._usage: ProcessUsage | None = None
        self._created_namespace = self._created_secret = self._created_cert_dir = False

    def argv(self) -> list[str]:
        folder = self.folder or build()
        args = [
            str(folder / BINARY),
            f"--kubeconfig={self.kubeconfig}",
            "--enable-scheme=pytorchjob",
            "--leader-elect=false",
            f"--metrics-bind-address=127.0.0.1:{self.metrics_port}",
            f"--health-probe-bind-address=127.0.0.1:{self.probe_port}",
            f"--webhook-server-port={self.webhook_port}",
            f"--controller-threads={self.threads}",
        ]
        if self.qps is not None:
            args.append(f"--kube-api-qps={max(1, round(self.qps))}")
        if self.burst is not None:
            args.append(f"--kube-api-burst={self.burst}")
        if self.log_level is not None:
            args.append(f"--zap-log-level={self.log_level}")
        return args

    def start(self) -> None:
        """Start it and return once it reports ready (its controllers are registered)."""
        if CERT_DIR.parent.exists():
            raise RuntimeError(
                f"{CERT_DIR.parent} exists: another training-operator runs here, or a run left it; remove it first"
            )
        began = time.monotonic()
        self.metrics_port, self.probe_port, self.webhook_port = free_port(), free_port(), free_port()
        argv = self.argv()
        try:
            with config.new_client_from_config(config_file=str(self.kubeconfig)) as api:
                core = client.CoreV1Api(api)
                self._prepare_secret(core)
                self._created_cert_dir = True
                CERT_DIR.mkdir(parents=True, mode=0o700)
                self.server = Server(
                    "kubeflow-training-operator", argv, self.log_dir, {"MY_POD_NAMESPACE": self.namespace}
                )
                self._mount_certificates(core)
            self.server.wait_ready(self._ready, _READY_TIMEOUT)
            if self.log_level in (None, "debug", "info") or (self.log_level or "").isdigit():
                self.server.wait_ready(self._workers_started, _READY_TIMEOUT)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        self._usage = process_usage(self.server.process.pid)

    def stop(self) -> None:
        """Read its usage one last time, then SIGTERM (SIGKILL after a grace period) its process group; remove the
        certificate folder and the Secret and namespace that start() created."""
        if self.server is not None:
            self._sample()
            self.server.stop()
            self.server = None
        if self._created_cert_dir:
            shutil.rmtree(CERT_DIR.parent, ignore_errors=True)
            self._created_cert_dir = False
        if self._created_secret or self._created_namespace:
            self._remove_secret()

    def cpu_seconds(self) -> float:
        usage = self._sample()
        return usage.cpu_seconds if usage else 0.0

    def peak_rss_bytes(self) -> int:
        usage = self._sample()
        return usage.peak_rss_bytes if usage else 0

    def log_tail(self, lines: int = 40) -> str:
        return self.server.log_tail(lines) if self.server else ""

    def _sample(self) -> ProcessUsage | None:
        if self.server is not None and self.server.process.poll() is None:
            with contextlib.suppress(OSError, ValueError, IndexError):
                self._usage = process_usage(self.server.process.pid)
        return self._usage

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.probe_port}/readyz", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def _workers_started(self) -> bool:
        assert self.server is not None
        text = self.server.log_path.read_text(errors="replace")
        return any("Starting workers" in line and "pytorchjob-controller" in line for line in text.splitlines())

    def _prepare_secret(self, core: client.CoreV1Api) -> None:
        try:
            core.create_namespace({"metadata": {"name": self.namespace}})
            self._created_namespace = True
        except client.ApiException as error:
            if error.status != 409:
                raise
        try:
            core.create_namespaced_secret(self.namespace, {"metadata": {"name": CERT_SECRET}})
            self._created_secret = True
        except client.ApiException as error:
            if error.status != 409:
                raise

    def _mount_certificates(self, core: client.CoreV1Api) -> None:
        """What the kubelet's Secret volume does in a cluster: the rotator's Secret, as files in CERT_DIR."""
        server = self.server
        assert server is not None

        def filled() -> dict[str, str] | None:
            server.check_alive()
            data = core.read_namespaced_secret(CERT_SECRET, self.namespace).data or {}
            return data if all(data.get(name) for name in CERT_FILES) else None

        data = poll_until(filled, timeout=_READY_TIMEOUT, what=f"the rotator to fill {self.namespace}/{CERT_SECRET}")
        for name in CERT_FILES:
            descriptor = os.open(CERT_DIR / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(descriptor, "wb") as file:
                file.write(base64.b64decode(data[name]))

    def _remove_secret(self) -> None:
        with (
            contextlib.suppress(client.ApiException, OSError),
            config.new_client_from_config(config_file=str(self.kubeconfig)) as api,
        ):
            core = client.CoreV1Api(api)
            if self._created_namespace:
                core.delete_namespace(self.namespace)
            elif self._created_secret:
                core.delete_namespaced_secret(CERT_SECRET, self.namespace)
        self._created_namespace = self._created_secret = False


def crd_manifest(folder: Path | None = None) -> dict[str, Any]:
    """The PyTorchJob CRD of the pinned module, as the build cached it."""
    text = ((folder or build()) / CRD_FILE).read_text()
    manifest: dict[str, Any] = yaml.safe_load(text)
    return manifest


def install_crd(api_client: client.ApiClient, folder: Path | None = None) -> None:
    """Create (or replace) the PyTorchJob CRD and wait until it is Established."""
    extensions = client.ApiextensionsV1Api(api_client)
    manifest = crd_manifest(folder)
    try:
        extensions.create_custom_resource_definition(manifest)
    except client.ApiException as error:
        if error.status != 409:
            raise
        current = extensions.read_custom_resource_definition(CRD_NAME)
        manifest["metadata"]["resourceVersion"] = current.metadata.resource_version
        extensions.replace_custom_resource_definition(CRD_NAME, manifest)

    def established() -> bool:
        conditions = extensions.read_custom_resource_definition(CRD_NAME).status.conditions or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    poll_until(established, timeout=_ESTABLISH_TIMEOUT, what=f"{CRD_NAME} Established")


def pytorchjob(name: str, ranks: int, image: str) -> dict[str, Any]:
    """A PyTorchJob of `ranks` pods: one Master and ranks-1 Workers, one container each (as our TrainingJob with
    workers.replicas=ranks has `ranks` pods of one container), restartPolicy OnFailure, small resources."""
    if ranks < 1:
        raise ValueError(f"ranks must be at least 1, not {ranks}")

    def replica_spec(replicas: int) -> dict[str, Any]:
        container = {
            "name": "pytorch",
            "image": image,
            "command": ["python", "-m", "trainer"],
            "resources": {
                "requests": {"cpu": "100m", "memory": "128Mi"},
                "limits": {"cpu": "100m", "memory": "128Mi"},
            },
        }
        return {"replicas": replicas, "restartPolicy": "OnFailure", "template": {"spec": {"containers": [container]}}}

    specs = {"Master": replica_spec(1)}
    if ranks > 1:
        specs["Worker"] = replica_spec(ranks - 1)
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": specs},
    }
