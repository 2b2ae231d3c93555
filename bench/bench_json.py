"""Benchmark: the operator's JSON on its hottest path, the pod watch, with the standard library's json (before) and
orjson (now), side by side in one process, rounds alternating.

The pods are real: the operator's own pod manifests of the digits example at 8 ranks, created in an envtest
apiserver and given a running pod's status (as a kubelet writes it), then read back raw, managedFields and
defaults included. Per side, for each pod: its watch event decoded (kube/watch.py) and cut to what the pod store
keeps (children/observe.py's essentials, the same on both sides). Prints the median over rounds of the CPU
microseconds per pod event, each side, and the ratio orjson / json. (The job store, packed as JSON, and the write
answers use orjson too; they are not measured here.)

Run: python bench/bench_json.py [--pods 256] [--rounds 7] (needs TJ_CONTROLPLANE_BIN, as `make bench` sets).
"""

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "operator")]

from kubernetes import client  # noqa: E402
from testbed.controlplane import running  # noqa: E402
from testbed.namespaces import create_namespace  # noqa: E402

from trainingjob.children.observe import essentials  # noqa: E402
from trainingjob.children.specs import pod_manifest, replicas  # noqa: E402
from trainingjob.model import TrainingJob  # noqa: E402

NAMESPACE = "bench"
SIDES: dict[str, Callable[[bytes], Any]] = {"json": json.loads, "orjson": orjson.loads}


def running_status(index: int) -> dict[str, Any]:
    now = "2026-01-01T00:00:00Z"
    return {
        "phase": "Running",
        "podIP": f"10.0.{index // 250}.{index % 250 + 1}",
        "hostIP": "10.1.0.1",
        "startTime": now,
        "conditions": [{"type": t, "status": "True", "lastTransitionTime": now} for t in ("Initialized", "Ready")],
        "containerStatuses": [
            {
                "name": "trainer",
                "ready": True,
                "restartCount": 0,
                "image": "trainer",
                "imageID": "sha256:0",
                "state": {"running": {"startedAt": now}},
            }
        ],
    }


def watch_lines(pods: int) -> list[bytes]:
    """Each pod's watch event, as the apiserver sends it: the operator's pod, created and then running."""
    with running(cluster=False, prefix="tj-bench-json-") as plane, plane.api_client() as api:
        core = client.CoreV1Api(api)
        create_namespace(core, NAMESPACE)
        manifest = yaml.safe_load((REPO / "examples" / "digits-ddp.yaml").read_text())
        manifest["metadata"] |= {"namespace": NAMESPACE, "uid": "00000000-0000-0000-0000-000000000001"}
        manifest["spec"]["workers"]["replicas"] = pods
        job = TrainingJob.model_validate(manifest)
        lines = []
        for index, replica in enumerate(replicas(job)):
            pod = pod_manifest(job, "00000000-0000-0000-0000-000000000001", replica, 1)
            pod["metadata"].pop("ownerReferences", None)  # no such job in this apiserver
            name = pod["metadata"]["name"]
            core.create_namespaced_pod(NAMESPACE, pod)
            core.patch_namespaced_pod_status(name, NAMESPACE, {"status": running_status(index)})
            raw = core.read_namespaced_pod(name, NAMESPACE, _preload_content=False).data
            lines.append(b'{"type":"MODIFIED","object":' + raw + b"}\n")
        return lines


def one_side(lines: list[bytes], loads: Callable[[bytes], Any]) -> float:
    """CPU microseconds per pod event: decoded, and cut to what the pod store keeps."""
    start = time.process_time()
    for line in lines:
        essentials(loads(line)["object"])
    return (time.process_time() - start) / len(lines) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    lines = watch_lines(args.pods)
    print(f"{len(lines)} pod events, {statistics.median(map(len, lines)):.0f} bytes each (median)")
    times: dict[str, list[float]] = {side: [] for side in SIDES}
    for _ in range(args.rounds):
        for side, loads in SIDES.items():
            times[side].append(one_side(lines * 20, loads))
    median = {side: statistics.median(values) for side, values in times.items()}
    for side, value in median.items():
        print(f"{side:>7}: {value:7.1f} us of CPU per pod event (decoded, cut to what the store keeps)")
    print(f"ratio orjson / json: {median['orjson'] / median['json']:.2f}")


if __name__ == "__main__":
    main()
