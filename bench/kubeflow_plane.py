"""The cluster tier of bench/bench_kubeflow.py, audited: the control plane with an audit log of the operators'
users, its kwok nodes, API clients, and the audit log read back as request counts per user and 'verb resource'."""

import contextlib
import datetime
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config
from testbed import kwok
from testbed.controlplane import Binaries, ControlPlane, node_ready
from testbed.processes import Server, poll_until

Json = dict[str, Any]
OURS_USER, KUBEFLOW_USER, MARKER_USER = "trainingjob-operator", "kubeflow-operator", "bench-marker"
READ_VERBS = ("get", "list", "watch")
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
CREATE_THREADS = 16
PODS_PER_NODE = 600
AUDIT_POLICY = f"""apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  users: ["{OURS_USER}", "{KUBEFLOW_USER}", "{MARKER_USER}"]
- level: None
"""


POD_CIDR = "10.128.0.0/12"


class RoutablePlane(ControlPlane):
    """The cluster tier with kwok's pod addresses outside the loopback range, as a real cluster's are: the tests'
    127.N.0.0/16 lets them serve a pod's progress port, but the apiserver refuses loopback addresses in Endpoints
    and EndpointSlices, so a job's Service would cost the controllers a string of refused, retried writes."""

    def _serve(self, name: str, args: list[str]) -> Server:
        if name == "kwok":
            args = [f"--cidr={POD_CIDR}" if a.startswith("--cidr=") else a for a in args]
        return super()._serve(name, args)


class AuditedControlPlane(RoutablePlane):
    """The routable cluster tier with an audit log of the operators' users (Metadata level, RequestReceived
    omitted) and the scheduler's client rate limit raised, so that binding pods is not what both sides wait for."""

    def __init__(self, root: Path, binaries: Binaries, *, scheduler_qps: int) -> None:
        # The policy goes to the base class, which writes it where its --audit-policy-file points (a file of our own
        # there was overwritten by its policy, so no request of the operators' users was logged).
        super().__init__(root, binaries, cluster=True, audit_policy=yaml.safe_load(AUDIT_POLICY))
        self.scheduler_qps = scheduler_qps

    def _listen_args(self) -> list[str]:
        return [
            *super()._listen_args(),
            "--audit-log-format=json",
            "--audit-log-mode=blocking",
            "--audit-log-maxsize=1000000",  # megabytes: never rotated during a run
        ]

    def _serve(self, name: str, args: list[str]) -> Server:
        if name == "kube-scheduler" and self.scheduler_qps:
            args = [*args, f"--kube-api-qps={self.scheduler_qps}", f"--kube-api-burst={2 * self.scheduler_qps}"]
        return super()._serve(name, args)


def add_nodes(core: client.CoreV1Api, count: int) -> None:
    """`count` more kwok nodes of PODS_PER_NODE pods each (and CPU to match), waited for until Ready."""
    names = []
    for index in range(count):
        node = kwok.gpu_node(f"bench-node-{index}", f"127.0.12.{index + 1}")
        capacity = dict(node["status"]["capacity"], pods=str(PODS_PER_NODE), cpu="1000", memory="4Ti")
        node["status"]["capacity"] = node["status"]["allocatable"] = capacity
        core.create_node(node)
        names.append(node["metadata"]["name"])
    poll_until(lambda: all(node_ready(core, n) for n in names), timeout=120, what=f"{count} kwok nodes Ready")


def api_client(kubeconfig: Path) -> client.ApiClient:
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = 2 * CREATE_THREADS
    return client.ApiClient(configuration)


class AuditLog:
    """Reads the apiserver's audit log from an offset: each request once (by auditID), by user and 'verb resource'."""

    def __init__(self, path: Path, api: client.ApiClient, marker_kubeconfig: Path) -> None:
        self.path = path
        self.marker = api_client(marker_kubeconfig)
        self.markers = 0

    def offset(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def requests(self, offset: int, start: datetime.datetime) -> dict[str, Counter[str]]:
        """Requests received from `start` until now, as far as the log has them: a request of the marker user is
        sent now, and the log is read until it shows up (the apiserver writes events in blocking mode)."""
        self.markers += 1
        name = f"bench-marker-{self.markers}"
        end = datetime.datetime.now(datetime.UTC)
        with contextlib.suppress(client.ApiException):  # 404: only its audit event matters
            client.CoreV1Api(self.marker).read_namespace(name)
        seen: dict[str, tuple[str, str]] = {}
        position = offset

        def read_more() -> bool:
            nonlocal position
            with self.path.open("rb") as file:
                file.seek(position)
                data = file.read()
            complete = data.rfind(b"\n") + 1
            position += complete
            found = False
            for line in data[:complete].splitlines():
                event = json.loads(line)
                user = event["user"]["username"]
                reference = event.get("objectRef") or {}
                if user == MARKER_USER:
                    found = found or reference.get("name") == name
                    continue
                received = datetime.datetime.fromisoformat(event["requestReceivedTimestamp"])
                if start <= received <= end:
                    seen.setdefault(event["auditID"], (user, request_key(event)))
            return found

        poll_until(read_more, timeout=120, interval=0.05, what="the audit log to record the end-of-window marker")
        counts: dict[str, Counter[str]] = {}
        for user, key in seen.values():
            counts.setdefault(user, Counter())[key] += 1
        return counts

    def close(self) -> None:
        self.marker.close()


def request_key(event: Json) -> str:
    reference = event.get("objectRef")
    if not reference:
        return f"{event['verb']} {event['requestURI'].split('?')[0]}"
    resource = reference.get("resource", "?")
    if reference.get("subresource"):
        resource += "/" + reference["subresource"]
    return f"{event['verb']} {resource}"


def reads(counts: Counter[str], verbs: Sequence[str] = READ_VERBS) -> int:
    return sum(n for key, n in counts.items() if key.split(" ")[0] in verbs)


def writes(counts: Counter[str]) -> int:
    return sum(n for key, n in counts.items() if key.split(" ")[0] in WRITE_VERBS)
