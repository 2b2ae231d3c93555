"""A real control plane on loopback: etcd + kube-apiserver (envtest tier), plus controller-manager,
scheduler and kwok with fake GPU nodes (cluster tier). Built from source by scripts/build-controlplane.sh."""

import contextlib
import json
import os
import shutil
import ssl
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config

from testbed import kwok
from testbed.kwok_deletes import DeletionConfirmer
from testbed.pki import Authority, CertPair, service_account_keys
from testbed.pod_range import PodRange
from testbed.processes import Server, free_port, poll_until

ENVTEST_BINARIES = ("etcd", "kube-apiserver")
CLUSTER_BINARIES = (*ENVTEST_BINARIES, "kube-controller-manager", "kube-scheduler", "kwok")
GPU_NODES = ("gpu-node-0", "gpu-node-1")
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
_STARTUP_TIMEOUT = 90.0
# The audit log keeps who changed TrainingJobs and TrainingSweeps, and who read pod logs, as a cluster's would:
# the REST API's tests read it to see whom Kubernetes took a write for (the caller, not the API).
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {
            "level": "Metadata",
            "verbs": ["create", "update", "patch", "delete"],
            "resources": [{"group": "trainingjob.io", "resources": ["trainingjobs", "trainingsweeps"]}],
        },
        {"level": "Metadata", "resources": [{"group": "", "resources": ["pods/log"]}]},
        {"level": "None"},
    ],
}
# Every write, for benchmarks that say who wrote what (apiserver_request_total has no client label).
WRITES_AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata", "verbs": ["create", "update", "patch", "delete"]}, {"level": "None"}],
}


@dataclass(frozen=True)
class Binaries:
    """Where the control-plane binaries are: $KUBEBUILDER_ASSETS first, then $TJ_CONTROLPLANE_BIN."""

    folders: tuple[Path, ...]

    @classmethod
    def from_environment(cls) -> "Binaries":
        names = ("KUBEBUILDER_ASSETS", "TJ_CONTROLPLANE_BIN")
        return cls(tuple(Path(os.environ[name]) for name in names if os.environ.get(name)))

    def path(self, name: str) -> Path:
        for folder in self.folders:
            if (folder / name).is_file():
                return folder / name
        raise FileNotFoundError(
            f"the control-plane binary {name!r} was not found in {[str(f) for f in self.folders]}; "
            "run `make controlplane` (it builds them) and set TJ_CONTROLPLANE_BIN to the folder it prints, "
            "or point KUBEBUILDER_ASSETS at a folder that has it"
        )


def write_kubeconfig(path: Path, server: str, ca: Path, user: str, credentials: CertPair) -> Path:
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "trainingjob", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [
            {
                "name": user,
                "user": {"client-certificate": str(credentials.cert), "client-key": str(credentials.key)},
            }
        ],
        "contexts": [{"name": user, "context": {"cluster": "trainingjob", "user": user}}],
        "current-context": user,
    }
    path.write_text(yaml.safe_dump(document))
    return path


class ControlPlane:
    """Starts and stops one control plane in `root`. `cluster=False` is the envtest tier. With `node_ip` it serves
    a real node (testbed/node.py) on that address instead of kwok's fake ones."""

    def __init__(
        self,
        root: Path,
        binaries: Binaries,
        *,
        cluster: bool,
        node_ip: str | None = None,
        audit_policy: dict[str, Any] | None = None,
    ) -> None:
        self.root = root
        self.audit_rules: dict[str, Any] = audit_policy or AUDIT_POLICY
        self.binaries = binaries
        self.cluster = cluster
        self.node_ip = node_ip
        self.servers: list[Server] = []
        self.pod_range: PodRange | None = None  # kwok's pod addresses, claimed when kwok starts
        self.deletions: DeletionConfirmer | None = None  # the kubelet's confirmations for kwok's nodes
        self.pki = Authority(root / "pki")
        self.service_account_keys = service_account_keys(root / "pki")
        self.port = free_port()
        self.server_url = f"https://127.0.0.1:{self.port}"
        self.admin = self.pki.issue("admin", "admin", ("system:masters",))
        self.kubeconfig = write_kubeconfig(
            root / "admin.kubeconfig", self.server_url, self.pki.cert, "admin", self.admin
        )
        self.audit_log = root / "audit.log"  # JSON lines, one per audited request (AUDIT_POLICY)

    def user_kubeconfig(self, user: str, groups: tuple[str, ...] = ()) -> Path:
        """A kubeconfig for a client-certificate user with no rights but what RBAC grants it."""
        credentials = self.pki.issue(f"user-{user}", user, groups)
        return write_kubeconfig(self.root / f"{user}.kubeconfig", self.server_url, self.pki.cert, user, credentials)

    def api_client(self, kubeconfig: Path | None = None) -> client.ApiClient:
        return config.new_client_from_config(config_file=str(kubeconfig or self.kubeconfig))

    def start(self) -> None:
        try:
            self._start_etcd_and_apiserver()
            if self.cluster:
                self._start_cluster_components()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self.deletions is not None:
            self.deletions.stop()
            self.deletions = None
        for server in reversed(self.servers):
            server.stop()
        self.servers.clear()
        if self.pod_range is not None:
            self.pod_range.release()
            self.pod_range = None

    def _serve(self, name: str, args: list[str]) -> Server:
        server = Server(name, [str(self.binaries.path(name)), *args], self.root)
        self.servers.append(server)
        return server

    def _start_etcd_and_apiserver(self) -> None:
        etcd_port = free_port()
        etcd = self._serve(
            "etcd",
            [
                f"--data-dir={self.root / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
                f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{free_port()}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )
        etcd.wait_ready(lambda: http_ok(f"http://127.0.0.1:{etcd_port}/health"), _STARTUP_TIMEOUT)
        serving = self.pki.issue("apiserver", "kube-apiserver", server=True, addresses=(self.node_ip or "127.0.0.1",))
        self._apiserver_args = [
            f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            *self._listen_args(),
            f"--secure-port={self.port}",
            f"--cert-dir={self.root / 'apiserver'}",
            f"--tls-cert-file={serving.cert}",
            f"--tls-private-key-file={serving.key}",
            f"--client-ca-file={self.pki.cert}",
            f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
            f"--service-account-key-file={self.service_account_keys.cert}",
            f"--service-account-signing-key-file={self.service_account_keys.key}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--allow-privileged=true",
            "--enable-priority-and-fairness=false",
            "--profiling=false",
            f"--audit-policy-file={self._audit_policy()}",
            f"--audit-log-path={self.audit_log}",
        ]
        self._start_apiserver()

    def _audit_policy(self) -> Path:
        path = self.root / "audit-policy.yaml"
        path.write_text(yaml.safe_dump(self.audit_rules))
        return path

    def audit_events(self) -> list[dict[str, Any]]:
        """The audit log's events so far (the last line may be half written: it is left out)."""
        if not self.audit_log.exists():
            return []
        events = []
        for line in self.audit_log.read_text().splitlines():
            with contextlib.suppress(ValueError):
                events.append(json.loads(line))
        return events

    def _listen_args(self) -> list[str]:
        # Owner references with blockOwnerDeletion need update on the owner's finalizers, as on clusters
        # that enable this plugin: the chart's RBAC test proves the operator has it.
        admission = "OwnerReferencesPermissionEnforcement"
        if self.node_ip is None:
            return [
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                "--authorization-mode=RBAC",
                f"--enable-admission-plugins={admission}",
            ]
        # A real node: pods reach the apiserver through the bridge; kubelets are authorized as nodes.
        kubelet_client = self.pki.issue("kubelet-client", "kube-apiserver-kubelet-client", ("system:masters",))
        return [
            "--bind-address=0.0.0.0",
            f"--advertise-address={self.node_ip}",
            "--authorization-mode=Node,RBAC",
            f"--enable-admission-plugins={admission},NodeRestriction",
            f"--kubelet-client-certificate={kubelet_client.cert}",
            f"--kubelet-client-key={kubelet_client.key}",
            "--kubelet-preferred-address-types=InternalIP",
        ]

    def _start_apiserver(self) -> None:
        apiserver = self._serve("kube-apiserver", self._apiserver_args)
        context = ssl.create_default_context(cafile=str(self.pki.cert))
        context.load_cert_chain(str(self.admin.cert), str(self.admin.key))
        apiserver.wait_ready(lambda: http_ok(f"{self.server_url}/readyz", context), _STARTUP_TIMEOUT)

    def restart_apiserver(self, down_for: float) -> None:
        """Stop kube-apiserver, keep it down `down_for` seconds (an outage, not a wait), start it on the same port;
        returns once it answers /readyz."""
        (apiserver,) = [s for s in self.servers if s.name == "kube-apiserver"]
        apiserver.stop()
        self.servers.remove(apiserver)
        time.sleep(down_for)
        self._start_apiserver()

    def _start_cluster_components(self) -> None:
        kubeconfig = str(self.kubeconfig)
        common = [
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
        ]
        self._serve(
            "kube-controller-manager",
            [
                *common,
                f"--secure-port={free_port()}",
                f"--service-account-private-key-file={self.service_account_keys.key}",
                f"--root-ca-file={self.pki.cert}",
                "--use-service-account-credentials=false",
                "--controllers=*",
            ],
        )
        self._serve("kube-scheduler", [*common, f"--secure-port={free_port()}"])
        if self.node_ip is None:
            self._start_kwok(kubeconfig)
        for server in self.servers:
            server.check_alive()

    def _start_kwok(self, kubeconfig: str) -> None:
        self.pod_range = PodRange()
        stages = self.root / "kwok-stages.yaml"
        stages.write_text(kwok.STAGES)
        self._serve(
            "kwok",
            [
                f"--kubeconfig={kubeconfig}",
                f"--config={stages}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={kwok.NODE_ANNOTATION}=fake",
                "--node-lease-duration-seconds=40",
                # Loopback pod IPs: whatever dials a pod (the operator's progress reads) stays on this machine; a
                # range of this cluster's own, so that tests of two clusters never serve on the same address.
                f"--cidr={self.pod_range.cidr}",
            ],
        )
        self.deletions = DeletionConfirmer(self.api_client())
        self.deletions.start()
        with self.api_client() as api:
            core = client.CoreV1Api(api)
            for index, name in enumerate(GPU_NODES):
                core.create_node(kwok.gpu_node(name, f"127.0.10.{index + 10}"))
            poll_until(
                lambda: all(node_ready(core, name) for name in GPU_NODES),
                timeout=_STARTUP_TIMEOUT,
                what=f"nodes {', '.join(GPU_NODES)} to be Ready",
            )

    def link_binaries(self, folder: Path) -> None:
        """Link the binaries this control plane uses (and kwokctl, helm) into `folder` for people."""
        folder.mkdir(parents=True, exist_ok=True)
        for name in (*CLUSTER_BINARIES, "kwokctl", "helm"):
            target = folder / name
            target.unlink(missing_ok=True)
            target.symlink_to(self.binaries.path(name))
        kubectl = shutil.which("kubectl")
        if kubectl and not (folder / "kubectl").exists():
            (folder / "kubectl").symlink_to(kubectl)


@contextlib.contextmanager
def running(
    *, cluster: bool, prefix: str = "tj-plane-", kind: type[ControlPlane] = ControlPlane
) -> Iterator[ControlPlane]:
    """A control plane of the tier asked for (a subclass of ControlPlane may change the apiserver's flags), in a
    temporary folder, stopped (by process group) on the way out."""
    with tempfile.TemporaryDirectory(prefix=prefix) as root:
        plane = kind(Path(root), Binaries.from_environment(), cluster=cluster)
        plane.start()
        try:
            yield plane
        finally:
            plane.stop()


def http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    with urllib.request.urlopen(url, timeout=2, context=context) as response:
        return bool(response.status == 200)


def node_ready(core: client.CoreV1Api, name: str) -> bool:
    node = core.read_node(name)
    conditions = node.status.conditions or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)
