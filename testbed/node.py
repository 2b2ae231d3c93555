"""The node tier: the control plane plus one real node (containerd + runc, a kubelet, CNI bridge networking,
kube-proxy and CoreDNS) on this machine, with our images imported. Started and stopped by process group; what
the node changes on the machine is recorded first and put back at the end (testbed/node_host.py)."""

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client, utils

from testbed import node_config as cfg
from testbed import node_host, node_storage
from testbed.controlplane import Binaries, ControlPlane, http_ok, node_ready, write_kubeconfig
from testbed.node_images import BuiltImage, Containerd, build_images, pause_archive
from testbed.processes import Server, poll_until

REPO = Path(__file__).resolve().parents[1]
NODE_BINARIES = ("kubelet", "kube-proxy", "coredns", "pause")
HOST_TOOLS = ("containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables", "ip6tables", "ip", "mount")
CNI_PLUGINS = ("bridge", "host-local", "loopback")
_STARTUP_TIMEOUT = 120.0
_LOCK_TIMEOUT = 900.0
_SETUP_HINT = "run `make node` (it installs the Debian packages and builds the node binaries and images)"


def cache_root() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "trainingjob"
    return Path(os.environ.get("TJ_CACHE_DIR", default))


def check_host() -> Path:
    """The folder of the node binaries ($TJ_NODE_BIN); raises naming whatever is missing (never a skip)."""
    missing = [tool for tool in HOST_TOOLS if shutil.which(tool) is None]
    missing += [f"/usr/lib/cni/{name}" for name in CNI_PLUGINS if not Path("/usr/lib/cni", name).exists()]
    folder = Path(os.environ.get("TJ_NODE_BIN", ""))
    missing += [f"$TJ_NODE_BIN/{name}" for name in NODE_BINARIES if not (folder / name).is_file()]
    if os.geteuid() != 0:
        missing.append("root (a kubelet and containerd need it)")
    if missing:
        raise RuntimeError(f"the node tier lacks {', '.join(missing)}: {_SETUP_HINT}")
    return folder


@dataclass
class NodeTier:
    """A running node tier: the control plane, the node's containerd, and the images our manifests name."""

    plane: ControlPlane
    paths: cfg.NodePaths
    containerd: Containerd
    images: dict[str, BuiltImage]

    def api_client(self) -> client.ApiClient:
        return self.plane.api_client()

    def image(self, name: str) -> BuiltImage:
        return self.images[name]


class _Node:
    """Starts the node's processes in order and stops them in reverse, leaving the machine as it was."""

    def __init__(self, plane: ControlPlane, paths: cfg.NodePaths, node_bin: Path) -> None:
        self.plane = plane
        self.paths = paths
        self.bin = node_bin
        self.servers: list[Server] = []
        self.containerd = Containerd(paths.containerd_socket)
        self.proxy_config = paths.root / "kube-proxy.yaml"

    def _serve(self, name: str, argv: list[str]) -> Server:
        server = Server(name, argv, self.paths.root)
        self.servers.append(server)
        return server

    def start_containerd(self) -> None:
        for folder in (self.paths.containerd_socket.parent, self.paths.cni_conf, self.paths.containerd_root):
            folder.mkdir(parents=True, exist_ok=True)
        self.paths.cni_conf.joinpath("10-trainingjob.conflist").write_text(cfg.cni_conflist(self.paths))
        reference, archive = pause_archive(self.bin / "pause", self.paths.root)
        config = self.paths.root / "containerd.toml"
        config.write_text(cfg.containerd_toml(self.paths, reference))
        server = self._serve("containerd", ["containerd", "--config", str(config)])
        # The CRI plugin initializes after the socket answers; it says so just before it serves the kubelet.
        server.wait_ready(lambda: "Start streaming server" in server.log_path.read_text(), _STARTUP_TIMEOUT)
        self.containerd.ensure(archive, reference)

    def start_kubelet(self) -> None:
        pki, root = self.plane.pki, self.paths.root
        credentials = pki.issue("kubelet", f"system:node:{cfg.NODE_NAME}", ("system:nodes",))
        kubeconfig = write_kubeconfig(root / "kubelet.kubeconfig", self._server_url, pki.cert, "kubelet", credentials)
        serving = pki.issue("kubelet-serving", cfg.NODE_NAME, server=True, addresses=(cfg.NODE_IP,))
        config = root / "kubelet.yaml"
        config.write_text(cfg.kubelet_yaml(self.paths, pki.cert, serving.cert, serving.key))
        server = self._serve(
            "kubelet",
            [
                str(self.bin / "kubelet"),
                f"--config={config}",
                f"--kubeconfig={kubeconfig}",
                f"--root-dir={self.paths.kubelet_root}",
                f"--cert-dir={root / 'kubelet-pki'}",
                f"--hostname-override={cfg.NODE_NAME}",
                f"--node-ip={cfg.NODE_IP}",
                "--v=1",
            ],
        )
        with self.plane.api_client() as api:
            core = client.CoreV1Api(api)
            server.wait_ready(lambda: node_ready(core, cfg.NODE_NAME), _STARTUP_TIMEOUT)

    def start_kube_proxy(self) -> None:
        pki, root = self.plane.pki, self.paths.root
        credentials = pki.issue("kube-proxy", "system:kube-proxy")
        kubeconfig = write_kubeconfig(root / "kube-proxy.kubeconfig", self._server_url, pki.cert, "proxy", credentials)
        self.proxy_config.write_text(cfg.kube_proxy_yaml(kubeconfig))
        server = self._serve("kube-proxy", [str(self.bin / "kube-proxy"), f"--config={self.proxy_config}"])
        server.wait_ready(lambda: http_ok(f"http://127.0.0.1:{cfg.KUBE_PROXY_HEALTHZ_PORT}/healthz"), _STARTUP_TIMEOUT)

    def start_coredns(self) -> None:
        pki, root = self.plane.pki, self.paths.root
        with self.plane.api_client() as api:
            utils.create_from_yaml(api, yaml_objects=cfg.COREDNS_RBAC)
        credentials = pki.issue("coredns", "system:coredns")
        kubeconfig = write_kubeconfig(root / "coredns.kubeconfig", self._server_url, pki.cert, "coredns", credentials)
        corefile = root / "Corefile"
        corefile.write_text(cfg.corefile(kubeconfig))
        server = self._serve("coredns", [str(self.bin / "coredns"), "-conf", str(corefile)])
        server.wait_ready(lambda: http_ok(f"http://127.0.0.1:{cfg.COREDNS_READY_PORT}/ready"), _STARTUP_TIMEOUT)

    @property
    def _server_url(self) -> str:
        return f"https://{cfg.NODE_IP}:{self.plane.port}"

    def drain(self) -> None:
        """Stop the scheduler and controllers, delete every pod while the kubelet runs (it unmounts their volumes
        and tears down their networks), and wait until no container is left running."""
        for server in [s for s in self.plane.servers if s.name in ("kube-scheduler", "kube-controller-manager")]:
            server.stop()
            self.plane.servers.remove(server)
        with self.plane.api_client() as api:
            core = client.CoreV1Api(api)
            for pod in core.list_pod_for_all_namespaces().items:
                with contextlib.suppress(client.ApiException):
                    core.delete_namespaced_pod(pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0)
        poll_until(lambda: not self._running_tasks(), timeout=90, what="the kubelet to stop every container")
        poll_until(lambda: not self._pod_mounts(), timeout=60, what="the kubelet to unmount the pods' volumes")

    def _running_tasks(self) -> list[str]:
        return self.containerd.ctr("tasks", "list", "--quiet").split()

    def _pod_mounts(self) -> list[str]:
        prefix = str(self.paths.kubelet_root / "pods") + "/"
        return [line for line in Path("/proc/self/mountinfo").read_text().splitlines() if prefix in line]

    def stop(self) -> list[str]:
        problems: list[str] = []
        by_name = {server.name: server for server in self.servers}
        for name in ("coredns", "kube-proxy", "kubelet"):
            if name in by_name:
                by_name[name].stop()
        if self.proxy_config.exists():
            cleanup = [str(self.bin / "kube-proxy"), f"--config={self.proxy_config}", "--cleanup"]
            subprocess.run(cleanup, capture_output=True, check=False)
        if "containerd" in by_name:
            problems += self._remove_containers()
            by_name["containerd"].stop()
        problems += _kill_shims(self.paths.containerd_socket)
        self.servers.clear()
        return problems

    def _remove_containers(self) -> list[str]:
        problems: list[str] = []
        for task in self._running_tasks():
            with contextlib.suppress(RuntimeError):
                self.containerd.ctr("tasks", "kill", "--signal", "SIGKILL", task)
        for container in self.containerd.ctr("containers", "list", "--quiet").split():
            try:
                with contextlib.suppress(RuntimeError):
                    self.containerd.ctr("tasks", "delete", "--force", container)
                self.containerd.ctr("containers", "delete", container)
            except RuntimeError as error:
                problems.append(str(error))
        return problems


def _kill_shims(socket: Path) -> list[str]:
    """containerd's shims outlive it: kill the ones serving our socket (found by their command line, by pid)."""
    problems: list[str] = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = proc.joinpath("cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"containerd-shim-runc-v2") and str(socket).encode() in argv:
            try:
                os.kill(int(proc.name), signal.SIGKILL)
            except ProcessLookupError:
                pass
            except OSError as error:
                problems.append(f"shim {proc.name}: {error}")
    return problems


@contextlib.contextmanager
def running(images: tuple[str, ...] = ("trainer", "operator", "api", "provisioner")) -> Iterator[NodeTier]:
    """The node tier, from a lock to a machine put back as it was. Builds or reuses `images` first; with the
    `provisioner` image it has a default StorageClass (testbed/node_storage.py)."""
    node_bin = check_host()
    built = build_images(REPO / "scripts" / "build-images.sh", images) if images else {}
    cache = cache_root() / "node"
    with node_host.machine_lock(cache / "tier.lock", _LOCK_TIMEOUT):
        host = node_host.HostState.record()
        root = Path(tempfile.mkdtemp(prefix="tj-node-"))
        paths = cfg.NodePaths(root=root, containerd_root=cache / "containerd")
        plane = ControlPlane(root / "plane", Binaries.from_environment(), cluster=True, node_ip=cfg.NODE_IP)
        node = _Node(plane, paths, node_bin)
        problems: list[str] = []
        try:
            node_host.create_bridge(cfg.BRIDGE, f"{cfg.NODE_IP}/24")
            node_host.set_sysctl("net/ipv4/ip_forward", "1")
            node_host.set_sysctl("net/bridge/bridge-nf-call-iptables", "1")
            plane.start()
            node.start_containerd()
            for image in built.values():
                node.containerd.ensure(image.archive, image.local_ref, image.public_ref)
                node.containerd.prune(image)
            node.start_kubelet()
            storage = "provisioner" in built
            if storage:  # its pod starts while kube-proxy and CoreDNS do
                paths.volumes.mkdir()
                with plane.api_client() as api:
                    node_storage.deploy(api, built["provisioner"], cfg.NODE_NAME, paths.volumes)
            node.start_kube_proxy()
            node.start_coredns()
            if storage:
                with plane.api_client() as api:
                    node_storage.wait_ready(api)
            yield NodeTier(plane, paths, node.containerd, built)
        finally:
            try:
                node.drain()
            except Exception as error:  # the stops below still run; what they cannot undo is reported
                print(f"[node] draining the node failed: {error}", file=sys.stderr)
            problems += node.stop()
            plane.stop()
            problems += node_host.unmount_under(root)
            shutil.rmtree(root, ignore_errors=True)
            node_host.delete_bridge(cfg.BRIDGE)
            problems += host.restore()
        if problems:
            raise RuntimeError("the node tier could not put the machine back:\n" + "\n".join(problems))
