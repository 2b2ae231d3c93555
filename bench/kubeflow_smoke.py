"""Smoke check of the Kubeflow baseline (bench/kubeflow.py) on the cluster tier: Kubeflow's training-operator runs
out of cluster, one PyTorchJob of 4 ranks reaches 4 Running pods on kwok nodes and a Running condition, then 10
jobs x 8 ranks do. Prints the times, the operator's CPU seconds and peak RSS.

Run: python bench/kubeflow_smoke.py [--unthrottled] [--threads N] (needs TJ_CONTROLPLANE_BIN, as `make bench` sets;
builds the operator on first use). Everything it starts is stopped by process group, its files removed.
"""

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "operator")]

from bench.kubeflow import (  # noqa: E402
    GROUP,
    PLURAL,
    UNTHROTTLED_BURST,
    UNTHROTTLED_QPS,
    VERSION,
    KubeflowOperator,
    build,
    install_crd,
    pytorchjob,
)
from kubernetes import client  # noqa: E402
from testbed.controlplane import running  # noqa: E402
from testbed.namespaces import create_namespace  # noqa: E402
from testbed.processes import poll_until  # noqa: E402

IMAGE = "ghcr.io/trainingjob/trainer:0.1.0"  # kwok runs no containers: any name will do
SCENARIOS = ((1, 4), (10, 8))  # (jobs, ranks)
DEADLINE = 180.0


def running_pods(core: client.CoreV1Api, namespace: str) -> int:
    response = core.list_namespaced_pod(namespace, _preload_content=False)
    items: list[dict[str, Any]] = json.loads(response.data)["items"]
    return sum((p.get("status") or {}).get("phase") == "Running" for p in items)


def running_jobs(custom: client.CustomObjectsApi, namespace: str) -> int:
    listed = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
    items: list[dict[str, Any]] = listed["items"]
    return sum(
        any(c.get("type") == "Running" and c.get("status") == "True" for c in j.get("status", {}).get("conditions", []))
        for j in items
    )


def scenario(api: client.ApiClient, operator: KubeflowOperator, namespace: str, jobs: int, ranks: int) -> None:
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    create_namespace(core, namespace)
    cpu_before = operator.cpu_seconds()
    names = [f"pt-{index}" for index in range(jobs)]
    began = time.monotonic()
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(
            pool.map(
                lambda n: custom.create_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, pytorchjob(n, ranks, IMAGE)
                ),
                names,
            )
        )
    created = time.monotonic() - began
    poll_until(
        lambda: running_pods(core, namespace) >= jobs * ranks,
        timeout=DEADLINE,
        interval=0.05,
        what=f"{jobs * ranks} pods Running in {namespace}",
    )
    pods_running = time.monotonic() - began
    poll_until(
        lambda: running_jobs(custom, namespace) >= jobs,
        timeout=DEADLINE,
        interval=0.05,
        what=f"{jobs} PyTorchJobs with a Running condition in {namespace}",
    )
    jobs_running = time.monotonic() - began
    print(
        f"{jobs} job(s) x {ranks} ranks: created {created:.2f} s, {jobs * ranks} pods Running {pods_running:.2f} s, "
        f"jobs Running {jobs_running:.2f} s; operator CPU {operator.cpu_seconds() - cpu_before:.2f} s in this "
        f"scenario, peak RSS {operator.peak_rss_bytes() / 2**20:.1f} MiB",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--unthrottled", action="store_true", help="a very high client qps/burst (default: 20/30)")
    parser.add_argument("--threads", type=int, default=1, help="--controller-threads (Kubeflow's default: 1)")
    args = parser.parse_args()
    folder = build()
    qps, burst = (UNTHROTTLED_QPS, UNTHROTTLED_BURST) if args.unthrottled else (None, None)
    with running(cluster=True, prefix="tj-kubeflow-") as plane, plane.api_client() as api:
        install_crd(api, folder)
        operator = KubeflowOperator(
            plane.kubeconfig, plane.root, qps=qps, burst=burst, threads=args.threads, folder=folder
        )
        try:
            operator.start()
            print(f"training-operator ready in {operator.startup_seconds:.2f} s: {' '.join(operator.argv()[1:])}")
            for index, (jobs, ranks) in enumerate(SCENARIOS):
                scenario(api, operator, f"smoke-{index}", jobs, ranks)
        except BaseException:
            print(f"the training-operator's log ends:\n{operator.log_tail()}", file=sys.stderr)
            raise
        finally:
            operator.stop()
        peak = operator.peak_rss_bytes() / 2**20
        print(f"operator total CPU {operator.cpu_seconds():.2f} s, peak RSS {peak:.1f} MiB")


if __name__ == "__main__":
    main()
