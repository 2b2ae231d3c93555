"""The operator's hot writes two ways on the envtest tier, alternately in the same run: through the generated
Kubernetes client (as the operator sent them before kube/direct.py) and straight on the same client's connections
(kube/direct.py, as it sends them now). Each write kind in turn, 8 at a time as the operator's write window:
the operator's own pod manifests created, their tracking finalizer released, deleted (guarded by UID), and status
patches of TrainingJobs (guarded by resourceVersion); every answer parsed as the operator parses it.

Run: python bench/bench_request_path.py [--pods 500] [--jobs 50] [--rounds 3] (needs TJ_CONTROLPLANE_BIN, as
`make bench` sets). Prints, per write kind, the median over rounds of this process's CPU milliseconds per request
(the client's cost; the apiserver's is its own) and of the wall seconds, each way, and the ratio direct / generated.

Measured (2 cores, quiet, 500 pods, 50 jobs x 4 status patches, 3 rounds): see bench/README.md."""

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "operator")]

from kubernetes import client  # noqa: E402
from testbed.controlplane import running  # noqa: E402
from testbed.crds import install_crd  # noqa: E402
from testbed.namespaces import create_namespace  # noqa: E402

from trainingjob.children.naming import TRACKING_FINALIZER  # noqa: E402
from trainingjob.children.specs import pod_manifest, replicas  # noqa: E402
from trainingjob.kube.client import connect  # noqa: E402
from trainingjob.kube.direct import MERGE_PATCH, STRATEGIC_MERGE_PATCH, Direct, custom_path, pod_path  # noqa: E402
from trainingjob.kube.resources import TIMEOUT, delete_options  # noqa: E402
from trainingjob.model import GROUP, PLURAL, VERSION, TrainingJob  # noqa: E402

WINDOW = 8
KINDS = ("create pod", "release pod", "delete pod", "patch status")
Manifest = dict[str, Any]


def _job(name: str, ranks: int) -> Manifest:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TrainingJob",
        "metadata": {"name": name},
        "spec": {"workers": {"replicas": ranks}, "trainer": {"steps": 100}},
    }


def _pods(ranks: int) -> list[Manifest]:
    """The operator's pods of one gang, owned by nothing (envtest has no garbage collector to act on an owner)."""
    job = TrainingJob.from_manifest({**_job("big", ranks), "metadata": {"name": "big", "namespace": "bench"}})
    pods = [pod_manifest(job, "00000000-0000-4000-8000-000000000001", r, 1) for r in replicas(job)]
    for pod in pods:
        del pod["metadata"]["ownerReferences"]
    return pods


def _status(active: int) -> Manifest:
    return {"phase": "Running", "attempt": 1, "workers": {"active": active}}


class Generated:
    """The writes as the generated client sends them."""

    def __init__(self, api: client.ApiClient) -> None:
        self.core, self.custom = client.CoreV1Api(api), client.CustomObjectsApi(api)

    def create(self, namespace: str, pod: Manifest) -> Manifest:
        return _read(self.core.create_namespaced_pod(namespace, pod, _preload_content=False, _request_timeout=TIMEOUT))

    def release(self, namespace: str, name: str, uid: str) -> Manifest:
        patch = {"metadata": {"uid": uid, "$deleteFromPrimitiveList/finalizers": [TRACKING_FINALIZER]}}
        return _read(self.core.patch_namespaced_pod(
            name, namespace, patch, _content_type=STRATEGIC_MERGE_PATCH, _preload_content=False,
            _request_timeout=TIMEOUT,
        ))  # fmt: skip

    def delete(self, namespace: str, name: str, uid: str) -> Manifest:
        options = delete_options(uid, gracePeriodSeconds=0)
        return _read(self.core.delete_namespaced_pod(
            name, namespace, body=options, _preload_content=False, _request_timeout=TIMEOUT
        ))  # fmt: skip

    def status(self, namespace: str, name: str, version: str, active: int) -> Manifest:
        body = {"metadata": {"resourceVersion": version}, "status": _status(active)}
        written: Manifest = self.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, PLURAL, name, body, _request_timeout=TIMEOUT
        )
        return written


class Straight:
    """The writes as kube/direct.py sends them."""

    def __init__(self, api: client.ApiClient) -> None:
        self.direct = Direct(api)

    def create(self, namespace: str, pod: Manifest) -> Manifest:
        return _read(self.direct.send("POST", pod_path(namespace), pod))

    def release(self, namespace: str, name: str, uid: str) -> Manifest:
        patch = {"metadata": {"uid": uid, "$deleteFromPrimitiveList/finalizers": [TRACKING_FINALIZER]}}
        return _read(self.direct.send("PATCH", pod_path(namespace, name), patch, content_type=STRATEGIC_MERGE_PATCH))

    def delete(self, namespace: str, name: str, uid: str) -> Manifest:
        return _read(self.direct.send("DELETE", pod_path(namespace, name), delete_options(uid, gracePeriodSeconds=0)))

    def status(self, namespace: str, name: str, version: str, active: int) -> Manifest:
        body = {"metadata": {"resourceVersion": version}, "status": _status(active)}
        path = custom_path(PLURAL, namespace, name, "status")
        return _read(self.direct.send("PATCH", path, body, content_type=MERGE_PATCH))


def _read(response: Any) -> Manifest:
    found: Manifest = json.loads(response.data)
    return found


def _timed(
    pool: ThreadPoolExecutor, write: Callable[[Any], Manifest], items: Iterable[Any]
) -> tuple[float, float, int]:
    """CPU seconds of this process, wall seconds, requests."""
    cpu, wall = time.process_time(), time.monotonic()
    count = len(list(pool.map(write, items)))
    return time.process_time() - cpu, time.monotonic() - wall, count


def _one_way(
    side: Generated | Straight, core: client.CoreV1Api, namespace: str, pods: list[Manifest], *, jobs: int, patches: int
) -> dict[str, tuple[float, float, int]]:
    """Each write kind once over the pods and the jobs, in a namespace of its own."""
    create_namespace(core, namespace)
    figures: dict[str, tuple[float, float, int]] = {}
    uids: dict[str, str] = {}

    def create(pod: Manifest) -> Manifest:
        made = side.create(namespace, pod)
        uids[made["metadata"]["name"]] = made["metadata"]["uid"]
        return made

    def status(name: str) -> Manifest:
        version = versions[name]
        for active in range(patches):
            written = side.status(namespace, name, version, active)
            version = written["metadata"]["resourceVersion"]
        return written

    custom = client.CustomObjectsApi(core.api_client)
    names = [f"job-{i}" for i in range(jobs)]
    versions = {n: custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, _job(n, 8))
                ["metadata"]["resourceVersion"] for n in names}  # fmt: skip
    with ThreadPoolExecutor(WINDOW) as pool:
        figures["create pod"] = _timed(pool, create, pods)
        figures["release pod"] = _timed(pool, lambda n: side.release(namespace, n, uids[n]), list(uids))
        figures["delete pod"] = _timed(pool, lambda n: side.delete(namespace, n, uids[n]), list(uids))
        cpu, wall, _ = _timed(pool, status, names)
        figures["patch status"] = (cpu, wall, jobs * patches)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=500)
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--patches", type=int, default=4, help="status patches per job, one after another")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    pods = _pods(args.pods)
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with running(cluster=False, prefix="tj-bench-request-path-") as plane:
        install_crd(plane.api_client())
        connection = connect(plane.kubeconfig, pool_size=WINDOW, retries=0)
        core = client.CoreV1Api(connection.api)
        sides: dict[str, Generated | Straight] = {
            "generated": Generated(connection.api),
            "direct": Straight(connection.api),
        }
        _one_way(sides["direct"], core, "warm-up", pods[:50], jobs=4, patches=2)
        for round_ in range(args.rounds):
            order = list(sides) if round_ % 2 == 0 else list(reversed(sides))
            for name in order:
                namespace = f"{name}-{round_}"
                figures = _one_way(sides[name], core, namespace, pods, jobs=args.jobs, patches=args.patches)
                for kind, (cpu, wall, count) in figures.items():
                    samples.setdefault((name, kind), []).append((cpu / count * 1000, wall))
        connection.close()
    print(f"{args.pods} pods, {args.jobs} jobs x {args.patches} status patches, {args.rounds} rounds, {WINDOW} at once")
    print("write: CPU ms per request generated | direct | ratio; wall s generated | direct")
    for kind in KINDS:
        (cpu_g, wall_g), (cpu_d, wall_d) = (
            (
                statistics.median(c for c, _ in samples[(way, kind)]),
                statistics.median(w for _, w in samples[(way, kind)]),
            )
            for way in ("generated", "direct")
        )
        print(f"  {kind}: {cpu_g:.2f} | {cpu_d:.2f} | {cpu_d / cpu_g:.2f}; {wall_g:.2f} | {wall_d:.2f}")


if __name__ == "__main__":
    main()
