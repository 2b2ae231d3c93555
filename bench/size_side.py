"""One side of bench_sizes.py, in a process of its own so its memory is its own: fill what keeps every job, the
operator's Stores (runtime.memory: its informers' sources over one namespace) or the REST API's job cache
(job_cache.JobCache, serving one namespace), from a real apiserver, and print the process's resident memory before
(everything imported) and once the expected number of jobs is in, and its peak.

Run: python bench/size_side.py operator|api KUBECONFIG NAMESPACE JOBS
"""

import gc
import logging
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "operator"), str(REPO / "api")]

from testbed.processes import poll_until  # noqa: E402

from trainingjob.kube.client import connect  # noqa: E402
from trainingjob.runtime.memory import Stores, sources, store_informer  # noqa: E402
from trainingjob_api.job_cache import JobCache  # noqa: E402
from trainingjob_api.kube import Kube  # noqa: E402
from trainingjob_api.settings import ApiSettings  # noqa: E402

TIMEOUT = 600.0


def memory() -> dict[str, int]:
    """VmRSS and VmHWM (the peak) of this process, in bytes."""
    found = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0]) * 1024
    return found


def wait_for(count: Any, jobs: int) -> None:
    poll_until(lambda: count() >= jobs, timeout=TIMEOUT, interval=0.2, what=f"{jobs} jobs in memory")


def operator(kubeconfig: str, namespace: str, jobs: int) -> object:
    stores = Stores()
    api = connect(kubeconfig).api
    # As the operator's (runtime.memory.store_informer), no reconcile woken.
    informers = [
        store_informer(api, source, store, lambda keys: None)
        for source, store in zip(sources(namespace), stores.all, strict=True)
    ]
    for informer in informers:
        informer.start()
    wait_for(lambda: len(stores.jobs), jobs)
    return stores


def api(kubeconfig: str, namespace: str, jobs: int) -> object:
    settings = ApiSettings(kubeconfig=Path(kubeconfig), namespaces=[namespace])
    cache = JobCache(Kube.connect(settings), settings)
    cache.start()
    wait_for(lambda: len(cache), jobs)
    return cache


def main() -> None:
    side, kubeconfig, namespace, jobs = sys.argv[1:5]
    logging.basicConfig(level=logging.WARNING)
    gc.collect()
    before = memory()
    kept = (operator if side == "operator" else api)(kubeconfig, namespace, int(jobs))
    gc.collect()
    after = memory()
    print(f"MEMORY {before['VmRSS']} {after['VmRSS']} {after['VmHWM']}", flush=True)
    del kept


if __name__ == "__main__":
    main()
