"""The configuration files of a real node, as pure functions of where things are (REAL_NODE.md says why each
non-default setting is there)."""

import json
from dataclasses import dataclass
from pathlib import Path

import yaml

NODE_NAME = "tj-node"
BRIDGE = "tjbr0"
NODE_IP = "10.244.0.1"
POD_SUBNET = "10.244.0.0/24"
CLUSTER_DOMAIN = "cluster.local"
KUBELET_HEALTHZ_PORT = 10248
KUBE_PROXY_HEALTHZ_PORT = 10256
COREDNS_READY_PORT = 18181


@dataclass(frozen=True)
class NodePaths:
    """Where one node tier keeps its state: `root` is thrown away, `containerd_root` (images) is a cache."""

    root: Path
    containerd_root: Path

    @property
    def containerd_socket(self) -> Path:
        return self.root / "containerd" / "containerd.sock"

    @property
    def containerd_state(self) -> Path:
        return self.root / "containerd" / "state"

    @property
    def kubelet_root(self) -> Path:
        return self.root / "kubelet"

    @property
    def cni_conf(self) -> Path:
        return self.root / "cni" / "net.d"

    @property
    def pod_logs(self) -> Path:
        return self.root / "pod-logs"

    @property
    def volumes(self) -> Path:
        """The folders of the node's local PersistentVolumes, static and provisioned."""
        return self.root / "volumes"


def containerd_toml(paths: NodePaths, sandbox_image: str) -> str:
    """containerd 1.6: its own root, state and socket; runc with cgroupfs; no oom_score_adj (no CAP_SYS_RESOURCE)."""
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    disabled = [f"io.containerd.snapshotter.v1.{name}" for name in ("btrfs", "zfs", "devmapper", "aufs")]
    return f"""version = 2
root = "{paths.containerd_root}"
state = "{paths.containerd_state}"
disabled_plugins = {json.dumps(disabled)}

[grpc]
  address = "{paths.containerd_socket}"

[{cri}]
  sandbox_image = "{sandbox_image}"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false

[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false

[{cri}.cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = "{paths.cni_conf}"
"""


def cni_conflist(paths: NodePaths) -> str:
    """A bridge with the node's address as the pods' gateway; host-local addresses kept in the tier's folder."""
    ipam = {
        "type": "host-local",
        "ranges": [[{"subnet": POD_SUBNET, "gateway": NODE_IP}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": str(paths.root / "cni" / "ipam"),
    }
    bridge = {"type": "bridge", "bridge": BRIDGE, "isGateway": True, "ipMasq": False, "hairpinMode": True}
    return json.dumps({"cniVersion": "1.0.0", "name": "trainingjob", "plugins": [{**bridge, "ipam": ipam}]}, indent=2)


def kubelet_yaml(paths: NodePaths, client_ca: Path, serving_cert: Path, serving_key: Path) -> str:
    config = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": NODE_IP,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": KUBELET_HEALTHZ_PORT,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(client_ca)},
        },
        "authorization": {"mode": "Webhook"},
        "tlsCertFile": str(serving_cert),
        "tlsPrivateKeyFile": str(serving_key),
        "containerRuntimeEndpoint": f"unix://{paths.containerd_socket}",
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "failSwapOn": False,
        "oomScoreAdj": 0,
        "clusterDNS": [NODE_IP],
        "clusterDomain": CLUSTER_DOMAIN,
        "podLogsDir": str(paths.pod_logs),
        # Images are imported, never pulled: never collect them.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "serializeImagePulls": False,
        "syncFrequency": "10s",
        "fileCheckFrequency": "10s",
        "nodeStatusUpdateFrequency": "5s",
    }
    return yaml.safe_dump(config)


def kube_proxy_yaml(kubeconfig: Path) -> str:
    """iptables mode; conntrack sysctls left alone (maxPerCore 0); no NodePorts on loopback (no route_localnet)."""
    config = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "mode": "iptables",
        "clusterCIDR": POD_SUBNET,
        "hostnameOverride": NODE_NAME,
        "healthzBindAddress": f"127.0.0.1:{KUBE_PROXY_HEALTHZ_PORT}",
        "metricsBindAddress": "127.0.0.1:10249",
        "nodePortAddresses": [f"{NODE_IP}/32"],
        "iptables": {"localhostNodePorts": False, "syncPeriod": "5s", "minSyncPeriod": "0s"},
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
    }
    return yaml.safe_dump(config)


def corefile(kubeconfig: Path) -> str:
    """Cluster DNS on the node's address: Services and pods from the apiserver, the rest from the host."""
    return f""".:53 {{
    bind {NODE_IP}
    errors
    ready 127.0.0.1:{COREDNS_READY_PORT}
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }}
    forward . /etc/resolv.conf
    loadbalance
}}
"""


COREDNS_RBAC = [
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "trainingjob-test:coredns"},
        "rules": [
            {
                "apiGroups": [""],
                "resources": ["services", "pods", "namespaces", "endpoints"],
                "verbs": ["list", "watch"],
            },
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
        ],
    },
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "trainingjob-test:coredns"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "trainingjob-test:coredns"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:coredns"}],
    },
]
