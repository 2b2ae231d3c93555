"""Benchmark: the memory the operator and the REST API keep for 1,000 of the largest TrainingJobs the size budgets
allow (operator/trainingjob/model/budget.py), against 1,000 of the smallest, side by side in one run on the envtest
tier (etcd + kube-apiserver).

Three namespaces hold N jobs each: the smallest (the built-in trainer on two workers), the largest by text (a
role's text at its budget, the spec at exactly its byte budget) and the largest by parts (as many small objects as
the item limits allow, the rest of the budget in text: what costs the most memory once parsed). For each namespace
and side, a process of its own (bench/size_side.py) fills what keeps every job, the operator's Stores or the REST
API's job cache, and reports its resident memory before and after. Prints the growth per job and its ratio to the
smallest jobs'.

Run: python bench/bench_sizes.py [--jobs 1000] (needs TJ_CONTROLPLANE_BIN).
"""

import argparse
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "operator")]

from kubernetes import client  # noqa: E402
from testbed.controlplane import ControlPlane, running  # noqa: E402
from testbed.crds import install_crd  # noqa: E402
from testbed.large_jobs import largest_job, many_small_parts, smallest_job  # noqa: E402
from testbed.namespaces import create_namespace  # noqa: E402

from trainingjob.generate import crd  # noqa: E402
from trainingjob.model import GROUP, PLURAL, VERSION  # noqa: E402
from trainingjob.model.budget import json_size  # noqa: E402

KINDS: dict[str, Callable[[str], dict[str, Any]]] = {
    "smallest": smallest_job,
    "largest-text": largest_job,
    "many-parts": many_small_parts,
}
SIDES = ("operator", "api")
MIB = 1024 * 1024


def create_jobs(plane: ControlPlane, namespace: str, build: Callable[[str], dict[str, Any]], jobs: int) -> None:
    """`jobs` copies of one manifest (as JSON once: the apiserver's decoding, not ours, is the cost), 16 at once."""
    local = threading.local()
    body = build("job")

    def create(index: int) -> None:
        if not hasattr(local, "api"):
            local.api = client.CustomObjectsApi(plane.api_client())
        manifest = {**body, "metadata": {"name": f"job-{index:05d}"}}
        local.api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, manifest, _preload_content=False)

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(create, range(jobs)))


def measure(plane: ControlPlane, side: str, namespace: str, jobs: int) -> dict[str, float]:
    argv = [sys.executable, str(REPO / "bench" / "size_side.py"), side, str(plane.kubeconfig), namespace, str(jobs)]
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=True)
    line = next(line for line in done.stdout.splitlines() if line.startswith("MEMORY"))
    before, after, peak = (int(word) for word in line.split()[1:])
    return {"growth": after - before, "peak": peak, "seconds": time.perf_counter() - start}


def report(jobs: int, stored: dict[str, int], results: dict[tuple[str, str], dict[str, float]]) -> None:
    print(f"{jobs} jobs per kind; resident memory after the list, less before it (after gc), per side")
    for side in SIDES:
        base = results[(side, "smallest")]["growth"] / jobs
        for kind in KINDS:
            found = results[(side, kind)]
            per_job = found["growth"] / jobs
            print(
                f"  {side:8s} {kind:13s} spec {stored[kind] / 1024:6.1f} KiB  grew {found['growth'] / MIB:8.1f} MiB"
                f"  ({per_job / 1024:7.1f} KiB a job, {per_job / max(base, 1):6.1f}x the smallest's)"
                f"  peak {found['peak'] / MIB:7.1f} MiB  {found['seconds']:5.1f} s"
            )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1000)
    args = parser.parse_args()
    os.environ.setdefault("PYTHONPATH", os.pathsep.join(str(REPO / part) for part in ("", "operator", "api")))
    results: dict[tuple[str, str], dict[str, float]] = {}
    stored = {kind: json_size(build("job")["spec"]) for kind, build in KINDS.items()}
    with running(cluster=False, prefix="tj-bench-sizes-") as plane, plane.api_client() as api:
        install_crd(api)
        install_crd(api, crd.SWEEP)
        for kind, build in KINDS.items():
            create_namespace(client.CoreV1Api(api), f"size-{kind}")
            start = time.perf_counter()
            create_jobs(plane, f"size-{kind}", build, args.jobs)
            print(f"created {args.jobs} {kind} jobs in {time.perf_counter() - start:.1f} s", flush=True)
        for kind in KINDS:
            for side in SIDES:
                results[(side, kind)] = measure(plane, side, f"size-{kind}", args.jobs)
    report(args.jobs, stored, results)


if __name__ == "__main__":
    main()
