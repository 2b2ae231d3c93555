"""Benchmark: a rank failure in a 256-rank DDP gang on the cluster tier, restarted in place against re-created, side
by side on one job in one run.

Run: python bench/bench_in_place.py [--ranks N] (needs TJ_CONTROLPLANE_BIN, as `make bench` sets). kwok runs no
containers, so rank 0's agent is played on its pod's IP (testbed/fake_agent.py, which takes only orders signed
with the job's key) and its readiness flips are written as its kubelet would. For each path it prints the
apiserver's writes from the failure until the status says Running again (every client's, from the apiserver's own
request counter: the operator's, the bench's kubelet writes, the controllers'; lease renewals aside) and the time that
took, less the backoff (0.1 s here).
"""

import argparse
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "operator")]

from kubernetes import client  # noqa: E402
from testbed import kwok, pods  # noqa: E402
from testbed.controlplane import Binaries, ControlPlane  # noqa: E402
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


def status(custom: client.CustomObjectsApi) -> dict[str, Any]:
    found: dict[str, Any] = custom.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, JOB).get("status") or {}
    return found


def measured(
    api: client.ApiClient, fail: Callable[[], None], back: Callable[[dict[str, Any]], bool]
) -> tuple[float, Counter[str]]:
    """Seconds from `fail` until the status is `back` (less the backoff), and the apiserver's writes meanwhile."""
    custom = client.CustomObjectsApi(api)
    before, began = writes(api), time.monotonic()
    fail()
    poll_until(lambda: back(status(custom)), timeout=300, interval=0.02, what="the gang running again")
    seconds = time.monotonic() - began - BACKOFF
    return seconds, writes(api) - before


def in_place(api: client.ApiClient, agent: FakeAgent, rank0: str, ranks: int) -> tuple[float, Counter[str]]:
    core = client.CoreV1Api(api)

    def fail() -> None:
        agent.set(state="failed", failures=[{"rank": 1, "exitCode": 137, "time": time.time()}])
        pods.set_ready(core, NS, rank0, False)  # its agent's readiness probe fails
        poll_until(lambda: 2 in agent.orders, timeout=60, interval=0.01, what="the order to run attempt 2")
        agent.set(state="running", running=ranks)  # every agent runs attempt 2 (from its warm spare)
        pods.set_ready(core, NS, rank0, True)

    return measured(api, fail, lambda s: s.get("phase") == "Running" and s.get("attempt") == 2)


def new_pods(api: client.ApiClient, ranks: int) -> tuple[float, Counter[str]]:
    """The same gang's rank 1 pod fails: every pod goes and attempt 3 gets pods of its own."""
    core = client.CoreV1Api(api)

    def fail() -> None:
        pods.finish_pod(core, NS, f"{JOB}-worker-1-1", 137)

    def back(found: dict[str, Any]) -> bool:
        items = core.list_namespaced_pod(NS, label_selector="trainingjob.io/attempt=3").items
        up = sum(p.status.phase == "Running" for p in items) >= ranks
        return up and found.get("phase") == "Running" and found.get("attempt") == 3

    return measured(api, fail, back)


def run(api: client.ApiClient, operator: OperatorProcess, ranks: int) -> None:
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    create_namespace(core, NS)
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "TrainingJob", "metadata": {"name": JOB}}
    custom.create_namespaced_custom_object(
        GROUP, VERSION, NS, PLURAL, body | {"spec": {"workers": {"replicas": ranks}, "trainer": {"steps": 100}}}
    )
    poll_until(lambda: status(custom).get("phase") == "Running", timeout=300, interval=0.1, what="the gang running")
    rank0 = core.read_namespaced_pod(f"{JOB}-worker-0-1", NS)
    key = job_key(operator.key, custom.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, JOB)["metadata"]["uid"])
    gang = {"attempt": 1, "state": "running", "pods": ranks, "running": ranks, "failures": []}
    with fake_agent(rank0.status.pod_ip, key, **gang) as agent:
        place_s, place_writes = in_place(api, agent, rank0.metadata.name, ranks)
    pods_s, pods_writes = new_pods(api, ranks)
    place, fresh = place_writes.total(), pods_writes.total()
    print(
        f"rank failure in a {ranks}-rank gang -> status Running again, backoff excluded: in place {place_s:.2f} s and "
        f"{place} apiserver writes (goals <= 1 s, <= 10); new pods {pods_s:.2f} s and {fresh} writes; "
        f"ratios {place_s / pods_s:.2f} (time), {place / fresh:.3f} (writes)"
    )
    for title, counts in (("in place", place_writes), ("new pods", pods_writes)):
        print(f"  {title}: " + ", ".join(f"{n} {key}" for key, n in counts.most_common(8)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranks", type=int, default=256)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tj-bench-") as root:
        plane = ControlPlane(Path(root), Binaries.from_environment(), cluster=True)
        plane.start()
        operator = OperatorProcess(plane.kubeconfig, Path(root), TJ_OPERATOR_BACKOFF_BASE_SECONDS=str(BACKOFF))
        try:
            with plane.api_client() as api:
                install_crd(api)
                for index in range(4):  # room for 400 pods: 6 nodes x 110
                    client.CoreV1Api(api).create_node(kwok.gpu_node(f"extra-node-{index}", f"127.0.11.{index + 1}"))
                operator.start()
                run(api, operator, args.ranks)
        finally:
            operator.stop()
            plane.stop()


if __name__ == "__main__":
    main()
