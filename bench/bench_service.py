"""What a job's headless Service costs the control plane while a big gang starts: ours, which selects every pod
of the job (every rank has a DNS name), against the same Service selecting only worker 0 (the rendezvous, the
one name the trainer needs), on the cluster tier with kwok nodes. The question it answers: is giving every rank
a name worth what its Endpoints cost at 1,000 ranks?

Run: python bench/bench_service.py [--ranks N] [--repetitions R] (needs TJ_CONTROLPLANE_BIN). Each run creates
a fresh namespace, the Service and the job's N pods as the operator writes them (less the tracking gate and the
owner reference: no operator runs here), and waits until every pod runs and the Service's EndpointSlices hold
exactly the pods it selects, all ready. It reports the wall time and the CPU seconds of etcd, the apiserver,
the controller-manager, the scheduler and kwok together; the two variants alternate, each run in a namespace of
its own after the last one is wholly gone. kwok gives pods addresses outside the loopback range here
(kubeflow_plane.RoutablePlane), as a real cluster does, so that the Endpoints are written, not refused.
"""

import argparse
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from statistics import median
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "operator")]

from bench.kubeflow import process_usage  # noqa: E402
from bench.kubeflow_plane import CREATE_THREADS, PODS_PER_NODE, RoutablePlane, add_nodes  # noqa: E402
from kubernetes import client  # noqa: E402
from testbed.controlplane import Binaries, ControlPlane  # noqa: E402
from testbed.namespaces import create_namespace, delete_namespace  # noqa: E402
from testbed.processes import poll_until  # noqa: E402

from trainingjob.children.naming import JOB_LABEL, RANK_LABEL  # noqa: E402
from trainingjob.children.specs import pod_manifest, replicas, service_manifest  # noqa: E402
from trainingjob.model import API_VERSION, KIND, TrainingJob  # noqa: E402

Json = dict[str, Any]
VARIANTS = ("every pod (ours)", "worker 0 only")


def big_job(namespace: str, ranks: int) -> TrainingJob:
    """The job as the apiserver stores it: `ranks` DDP workers running the built-in trainer."""
    metadata = {"name": "big", "namespace": namespace, "uid": "bench-uid", "generation": 1, "resourceVersion": "1"}
    spec = {"mode": "DDP", "workers": {"replicas": ranks}, "trainer": {"steps": 100}}
    return TrainingJob.model_validate({"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": spec})


def manifests(namespace: str, ranks: int, rank_0_only: bool) -> tuple[Json, list[Json]]:
    job = big_job(namespace, ranks)
    service = service_manifest(job, "bench-uid")
    if rank_0_only:
        service["spec"]["selector"] = {JOB_LABEL: "big", RANK_LABEL: "0"}
    pods = [pod_manifest(job, "bench-uid", replica, attempt=1) for replica in replicas(job)]
    for manifest in (service, *pods):
        del manifest["metadata"]["ownerReferences"]  # no job object: the garbage collector would delete them
    for pod in pods:
        pod["spec"].pop("schedulingGates", None)  # no operator to release them
    return service, pods


def settled(
    core: client.CoreV1Api, discovery: client.DiscoveryV1Api, namespace: str, ranks: int, selected: int
) -> bool:
    pods = core.list_namespaced_pod(namespace, resource_version="0").items
    if sum(p.status.phase == "Running" for p in pods) < ranks:
        return False
    slices = discovery.list_namespaced_endpoint_slice(namespace, label_selector="kubernetes.io/service-name=big")
    endpoints = [e for s in slices.items for e in s.endpoints or []]
    return len(endpoints) == selected and all(e.conditions.ready for e in endpoints)


def one_run(
    plane: ControlPlane, api: client.ApiClient, namespace: str, ranks: int, rank_0_only: bool
) -> tuple[float, float]:
    core, discovery = client.CoreV1Api(api), client.DiscoveryV1Api(api)
    create_namespace(core, namespace)
    service, pods = manifests(namespace, ranks, rank_0_only)
    core.create_namespaced_service(namespace, service)
    selector = service["spec"]["selector"].items()
    selected = sum(selector <= p["metadata"]["labels"].items() for p in pods)

    def cpu() -> float:
        return sum(process_usage(s.process.pid).cpu_seconds for s in plane.servers)

    before, started = cpu(), time.monotonic()
    with ThreadPoolExecutor(CREATE_THREADS) as pool:
        list(pool.map(lambda pod: core.create_namespaced_pod(namespace, pod), pods))
    poll_until(lambda: settled(core, discovery, namespace, ranks, selected), timeout=1800, interval=0.5, what="settled")
    wall, spent = time.monotonic() - started, cpu() - before
    delete_namespace(core, namespace, timeout=1800)
    return wall, spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--repetitions", type=int, default=3)
    args = parser.parse_args()
    results: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    with tempfile.TemporaryDirectory(prefix="tj-bench-service-") as root:
        plane = RoutablePlane(Path(root), Binaries.from_environment(), cluster=True)
        plane.start()
        try:
            with plane.api_client() as api:
                api.configuration.connection_pool_maxsize = 2 * CREATE_THREADS
                add_nodes(client.CoreV1Api(api), max(2, -(-args.ranks * 2 // PODS_PER_NODE)))
                one_run(plane, api, "warm-up", 64, rank_0_only=False)  # the first run of a fresh plane is slower
                for repetition in range(args.repetitions):
                    for rank_0_only in (False, True) if repetition % 2 == 0 else (True, False):
                        wall, spent = one_run(
                            plane, api, f"run-{repetition}-{int(rank_0_only)}", args.ranks, rank_0_only
                        )
                        results[rank_0_only].append((wall, spent))
                        print(
                            f"{VARIANTS[rank_0_only]}: {wall:.1f} s to settled, control plane CPU {spent:.1f} s",
                            flush=True,
                        )
        finally:
            plane.stop()
    ours, rank_0 = ([median(r[i] for r in results[v]) for i in (0, 1)] for v in (False, True))
    print(
        f"\n{args.ranks} ranks, median of {args.repetitions}, every pod (ours) vs worker 0 only: "
        f"time {ours[0]:.1f} s vs {rank_0[0]:.1f} s ({ours[0] / rank_0[0]:.2f}x); "
        f"control plane CPU {ours[1]:.1f} s vs {rank_0[1]:.1f} s ({ours[1] / rank_0[1]:.2f}x)"
    )


if __name__ == "__main__":
    main()
