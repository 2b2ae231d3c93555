"""Benchmark: a rank failure in a 256-rank DDP gang on the cluster tier, restarted in place against re-created, side
by side on one job in one run.

Run: python bench/bench_in_place.py [--ranks N] (needs TJ_CONTROLPLANE_BIN, as `make bench` sets). kwok runs no
containers, so rank 0's agent is played on its pod's IP (testbed/fake_agent.py, which takes only orders signed
with the job's key) and its readiness flips are written as its kubelet would. For each path it prints the
apiserver's writes from the failure until the status says Running again (every client's, from the apiserver's own
request counter: the operator's, the bench's kubelet writes, the controllers'; lease renewals aside) and the time that
took, less the backoff (0.1 s here). The apiserver's audit log says who made each write and how it was answered.

kwok gives pods loopback IPs (127.N.0.0/16, so that fake agents can listen on them), which the apiserver refuses in
Endpoints and EndpointSlices (422): the endpoints controllers' writes for the job's Service all fail, and each pod
change retries them (and adds a Warning Event). They are counted, as the apiserver answered them, and listed apart.
On a cluster whose pod IPs it accepts, a readiness flip leaves Endpoints as they are (publishNotReadyAddresses keeps
the address among the ready ones) and rewrites the EndpointSlice once (its `serving` condition follows readiness).
"""

import argparse
import ipaddress
import re
import socket
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "operator")]

from bench.kubeflow_plane import RoutablePlane  # noqa: E402
from kubernetes import client  # noqa: E402
from testbed import kwok, pods  # noqa: E402
from testbed.controlplane import WRITES_AUDIT_POLICY, Binaries, ControlPlane  # noqa: E402
from testbed.crds import install_crd  # noqa: E402
from testbed.fake_agent import FakeAgent, fake_agent  # noqa: E402
from testbed.namespaces import create_namespace  # noqa: E402
from testbed.operator import OperatorProcess  # noqa: E402
from testbed.processes import poll_until  # noqa: E402

from trainingjob.children.agent import job_key  # noqa: E402
from trainingjob.model import GROUP, PLURAL, VERSION  # noqa: E402

NS, JOB, BACKOFF = "bench", "gang", 0.1
WRITE = re.compile(r'^apiserver_request_total\{([^}]*verb="(?:POST|PUT|PATCH|DELETE)"[^}]*)\} (\S+)$', re.MULTILINE)
LABEL = re.compile(r'(resource|subresource|verb)="([^"]*)"')


Measured = tuple[float, Counter[str], datetime]  # seconds, writes by 'verb resource', when the window closed


def writes(api: client.ApiClient) -> Counter[str]:
    """Every write the apiserver has answered so far (its own counter, all clients), by 'verb resource'; lease
    renewals left out (leader election's and the nodes' heartbeats run on their own clock, whatever fails)."""
    request = api.param_serialize(method="GET", resource_path="/metrics", auth_settings=["BearerToken"])
    response = api.call_api(*request)
    response.read()
    found: Counter[str] = Counter()
    for labels, count in WRITE.findall(response.data.decode()):
        named = dict(LABEL.findall(labels))
        resource = "/".join(filter(None, (named.get("resource"), named.get("subresource"))))
        if resource == "leases":
            continue
        found[f"{named.get('verb', '?')} {resource}"] += int(float(count))
    return found


def audited(plane: ControlPlane) -> dict[str, dict[str, Any]]:
    """The audit log's writes so far by audit ID, lease renewals left out."""
    events = plane.audit_events()
    return {e["auditID"]: e for e in events if (e.get("objectRef") or {}).get("resource") != "leases"}


def who_wrote(plane: ControlPlane, before: dict[str, dict[str, Any]], ended: datetime, total: int) -> Counter[str]:
    """The writes audited after `before` and received by `ended`, by 'client: verb resource -> code'. The log is
    written as requests end: read until it has the `total` the apiserver's counter saw."""

    def read() -> list[dict[str, Any]] | None:
        news = [e for key, e in audited(plane).items() if key not in before and _received(e) <= ended]
        return news if len(news) >= total else None

    found: Counter[str] = Counter()
    news = poll_until(read, timeout=10, interval=0.05, what=f"the audit log's {total} writes")
    for event in news:
        ref = event.get("objectRef") or {}
        resource = "/".join(filter(None, (ref.get("resource"), ref.get("subresource"))))
        code = (event.get("responseStatus") or {}).get("code", "?")
        found[f"{_client(event.get('userAgent', '?'))}: {event.get('verb')} {resource} -> {code}"] += 1
    return found


def _client(agent: str) -> str:
    """Who by its user agent: the controller-manager's clients end in their controller's name."""
    program = agent.split("/", 1)[0]
    return agent.rsplit("/", 1)[-1] if program == "kube-controller-manager" else program


def _received(event: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00"))


def own_address() -> str:
    """This machine's address outside loopback (the one its default route leaves from): rank 0's agent listens there,
    where the operator can reach it and the apiserver takes it in Endpoints. No packet is sent."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))
        address = str(probe.getsockname()[0])
    if ipaddress.ip_address(address).is_loopback:
        raise SystemExit(f"this machine has no address outside loopback ({address}): rank 0's agent needs one")
    return address


def move_rank0(core: client.CoreV1Api, name: str, address: str) -> None:
    """Rank 0's pod on `address` (kwok gave it one in the routable range, where nothing listens)."""
    ips = [{"op": "replace", "path": "/status/podIP", "value": address}]
    core.patch_namespaced_pod_status(
        name, NS, [*ips, {"op": "replace", "path": "/status/podIPs", "value": [{"ip": address}]}]
    )

    def listed() -> bool:
        subsets = core.read_namespaced_endpoints(JOB, NS).subsets or []
        return any(a.ip == address for subset in subsets for a in subset.addresses or [])

    poll_until(listed, timeout=60, what="rank 0's new address in the Service's Endpoints")


def status(custom: client.CustomObjectsApi) -> dict[str, Any]:
    found: dict[str, Any] = custom.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, JOB).get("status") or {}
    return found


def measured(api: client.ApiClient, fail: Callable[[], None], back: Callable[[dict[str, Any]], bool]) -> Measured:
    """Seconds from `fail` until the status is `back` (less the backoff), the apiserver's writes meanwhile, and when
    that was."""
    custom = client.CustomObjectsApi(api)
    before, began = writes(api), time.monotonic()
    fail()
    poll_until(lambda: back(status(custom)), timeout=300, interval=0.02, what="the gang running again")
    seconds = time.monotonic() - began - BACKOFF
    return seconds, writes(api) - before, datetime.now(UTC)


def in_place(api: client.ApiClient, agent: FakeAgent, rank0: str, ranks: int) -> Measured:
    core = client.CoreV1Api(api)

    def fail() -> None:
        agent.set(state="failed", failures=[{"rank": 1, "exitCode": 137, "time": time.time()}])
        pods.set_ready(core, NS, rank0, False)  # its agent's readiness probe fails
        poll_until(lambda: 2 in agent.orders, timeout=60, interval=0.01, what="the order to run attempt 2")
        agent.set(state="running", running=ranks)  # every agent runs attempt 2 (from its warm spare)
        pods.set_ready(core, NS, rank0, True)

    return measured(api, fail, lambda s: s.get("phase") == "Running" and s.get("attempt") == 2)


def new_pods(api: client.ApiClient, ranks: int) -> Measured:
    """The same gang's rank 1 pod fails: every pod goes and attempt 3 gets pods of its own."""
    core = client.CoreV1Api(api)

    def fail() -> None:
        pods.finish_pod(core, NS, f"{JOB}-worker-1-1", 137)

    def back(found: dict[str, Any]) -> bool:
        items = core.list_namespaced_pod(NS, label_selector="trainingjob.io/attempt=3").items
        up = sum(p.status.phase == "Running" for p in items) >= ranks
        return up and found.get("phase") == "Running" and found.get("attempt") == 3

    return measured(api, fail, back)


def run(api: client.ApiClient, plane: ControlPlane, operator: OperatorProcess, ranks: int) -> None:
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    create_namespace(core, NS)
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "TrainingJob", "metadata": {"name": JOB}}
    custom.create_namespaced_custom_object(
        GROUP, VERSION, NS, PLURAL, body | {"spec": {"workers": {"replicas": ranks}, "trainer": {"steps": 100}}}
    )
    poll_until(lambda: status(custom).get("phase") == "Running", timeout=300, interval=0.1, what="the gang running")
    rank0, address = core.read_namespaced_pod(f"{JOB}-worker-0-1", NS), own_address()
    move_rank0(core, rank0.metadata.name, address)
    key = job_key(operator.key, custom.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, JOB)["metadata"]["uid"])
    gang = {"attempt": 1, "state": "running", "pods": ranks, "running": ranks, "failures": []}
    before = audited(plane)
    with fake_agent(address, key, **gang) as agent:
        place_s, place_writes, ended = in_place(api, agent, rank0.metadata.name, ranks)
    who = who_wrote(plane, before, ended, place_writes.total())
    pods_s, pods_writes, _ = new_pods(api, ranks)
    place, fresh = place_writes.total(), pods_writes.total()
    print(
        f"rank failure in a {ranks}-rank gang -> status Running again, backoff excluded: in place {place_s:.2f} s and "
        f"{place} apiserver writes (goals <= 1 s, <= 10); new pods {pods_s:.2f} s and {fresh} writes; "
        f"ratios {place_s / pods_s:.2f} (time), {place / fresh:.3f} (writes)"
    )
    for title, counts in (("in place", place_writes), ("new pods", pods_writes)):
        print(f"  {title}: " + ", ".join(f"{n} {key}" for key, n in counts.most_common(8)))
    print("  in place, by client (the audit log): " + ", ".join(f"{n} {key}" for key, n in sorted(who.items())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranks", type=int, default=256)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tj-bench-") as root:
        plane = RoutablePlane(Path(root), Binaries.from_environment(), cluster=True, audit_policy=WRITES_AUDIT_POLICY)
        plane.start()
        operator = OperatorProcess(plane.kubeconfig, Path(root), TJ_OPERATOR_BACKOFF_BASE_SECONDS=str(BACKOFF))
        try:
            with plane.api_client() as api:
                install_crd(api)
                for index in range(4):  # room for 400 pods: 6 nodes x 110
                    client.CoreV1Api(api).create_node(kwok.gpu_node(f"extra-node-{index}", f"127.0.11.{index + 1}"))
                operator.start()
                run(api, plane, operator, args.ranks)
        finally:
            operator.stop()
            plane.stop()


if __name__ == "__main__":
    main()
