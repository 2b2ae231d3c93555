"""Benchmark: the node tier and recovery on a real node, each against a baseline measured in the same run.

Run: python bench/bench_node.py [--skip-goodput] (root; TJ_CONTROLPLANE_BIN and TJ_NODE_BIN set, as `make bench`
does; images built by scripts/build-images.sh). Prints:

- warm start: the node tier (control plane + kubelet + containerd + kube-proxy + CoreDNS, images already
  imported) against the kwok cluster tier started just before it;
- restart-to-resume: from SIGKILL of rank 1 to rank 0 of the next attempt reporting a step past the checkpoint
  it resumed from, less the configured backoff, against a fresh start of the same job (create to first step);
- restart paths (4 ranks): the same measure when rank 1's trainer process is killed in its healthy pod (the gang
  restarts in place) against rank 1's whole container killed (the pods are re-created), side by side;
- goodput: digits DDP with rank 1 killed every N steps: the goodput in time its status reports (productive over
  wall), its wall time against the same job with no failure, and the steps it computed for the steps it needed.
"""

import argparse
import signal
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "operator"), str(REPO / "api"), str(REPO / "trainer-image"), str(REPO)]

from kubernetes import client  # noqa: E402
from testbed import controlplane, node  # noqa: E402
from testbed.harness import Harness  # noqa: E402
from testbed.node_cluster import OperatorPodLog, install_chart, signal_container, signal_trainer  # noqa: E402
from testbed.node_jobs import (  # noqa: E402
    at_step,
    claim_on_local_volume,
    example,
    last_step,
    log_of,
    pod_of,
    resumed_steps,
)

BACKOFF_SECONDS = 1.0  # operator.settings.backoffBaseSeconds in testbed/node_cluster.py


def warm_start() -> None:
    started = time.monotonic()
    with controlplane.running(cluster=True):
        cluster_s = time.monotonic() - started
    started = time.monotonic()
    with node.running():
        node_s = time.monotonic() - started
        stopping = time.monotonic()
    stop_s = time.monotonic() - stopping
    print(
        f"warm start: node tier {node_s:.1f} s (goal <= 10 s), kwok cluster tier {cluster_s:.1f} s, "
        f"ratio {node_s / cluster_s:.2f}; node tier teardown {stop_s:.1f} s"
    )


def start_job(tier: node.NodeTier, h: Harness, name: str, steps: int, every: int, *, workers: int = 2) -> None:
    claim_on_local_volume(tier, h.ns, f"{name}-checkpoints")
    job = example("digits-ddp.yaml")[0]
    job["metadata"]["name"] = name
    job["spec"]["trainer"]["steps"] = steps
    job["spec"]["workers"]["replicas"] = workers
    # The example asks 500m of CPU per worker: four of them and the chart's pods do not fit the node's two cores.
    job["spec"]["workers"]["resources"]["requests"]["cpu"] = f"{1000 // max(workers, 2)}m"
    job["spec"]["checkpoint"] = {
        "volume": {"persistentVolumeClaim": {"claimName": f"{name}-checkpoints"}},
        "everySteps": every,
    }
    h.create(job)


def restart_to_resume(tier: node.NodeTier, h: Harness) -> None:
    created = time.monotonic()
    start_job(tier, h, "resume", 100000, 50)
    at_step(h, "resume", 1, 1)
    fresh_s = time.monotonic() - created
    report = at_step(h, "resume", 1, 120)
    checkpoint = report.get("lastCheckpointStep", 0)
    killed = time.monotonic()
    signal_container(tier, pod_of(h, "resume", "worker", 1, attempt=1), signal.SIGKILL)
    at_step(h, "resume", 2, checkpoint + 1)
    resume_s = time.monotonic() - killed - BACKOFF_SECONDS
    print(
        f"restart-to-resume (2 ranks, checkpoint at step {checkpoint}): {resume_s:.1f} s (goal <= 15 s), "
        f"fresh start {fresh_s:.1f} s, ratio {resume_s / fresh_s:.2f}"
    )
    h.patch_spec("resume", {"runPolicy": {"suspend": True}})


def restart_paths(tier: node.NodeTier, h: Harness, workers: int = 4) -> None:
    seconds = {}
    for path in ("in-place", "new-pods"):
        name = f"{path}-{workers}"
        start_job(tier, h, name, 100000, 50, workers=workers)
        checkpoint = at_step(h, name, 1, 120).get("lastCheckpointStep", 0)
        rank1 = pod_of(h, name, "worker", 1, attempt=1)
        killed = time.monotonic()
        if path == "in-place":
            signal_trainer(tier, rank1, signal.SIGKILL)
            at_step(h, name, 2, checkpoint + 1, pods_attempt=1)
        else:
            signal_container(tier, rank1, signal.SIGKILL)
            at_step(h, name, 2, checkpoint + 1)
        seconds[path] = time.monotonic() - killed - BACKOFF_SECONDS
        h.patch_spec(name, {"runPolicy": {"suspend": True}})
    print(
        f"restart paths ({workers} ranks, kill to every rank past the checkpoint, backoff excluded): in place "
        f"{seconds['in-place']:.1f} s (goal < 3 s), new pods {seconds['new-pods']:.1f} s, "
        f"ratio {seconds['in-place'] / seconds['new-pods']:.2f} (goal <= 0.4)"
    )


def run_to_end(tier: node.NodeTier, h: Harness, name: str, steps: int, kill_every: int) -> tuple[float, int, float]:
    """Wall seconds, steps computed by rank 0 over every attempt, and the goodput the job's status reports."""
    started = time.monotonic()
    start_job(tier, h, name, steps, 50)
    computed, attempt = 0, 1
    while kill_every:
        target = kill_every * attempt
        if target >= steps:
            break
        at_step(h, name, attempt, target)
        resumed = _resumed_step(h, name, attempt)  # read while the attempt's pods are there
        signal_container(tier, pod_of(h, name, "worker", 1, attempt=attempt), signal.SIGKILL)
        computed += last_step(h, name, attempt) - resumed
        attempt += 1
    final = h.wait_phase(name, "Succeeded", timeout=900)["status"]
    computed += steps - _resumed_step(h, name, final["attempt"])
    return time.monotonic() - started, computed, float(final["goodput"]["ratio"])


def _resumed_step(h: Harness, name: str, attempt: int) -> int:
    """The step `attempt` resumed from (0 for a fresh start), from its rank 0's log."""
    if attempt == 1:
        return 0
    found = resumed_steps(log_of(h, pod_of(h, name, "worker", 0, attempt)))
    return found[0] if found else 0


def goodput(tier: node.NodeTier, h: Harness, steps: int = 1500, kill_every: int = 400) -> None:
    clean_s, _, clean_goodput = run_to_end(tier, h, "clean", steps, 0)
    faulty_s, faulty_steps, faulty_goodput = run_to_end(tier, h, "faulty", steps, kill_every)
    print(
        f"goodput with rank 1's pod killed every {kill_every} steps: {faulty_goodput:.3f} in time, as the status "
        f"says (without failures {clean_goodput:.3f}); wall time {faulty_s:.0f} s vs {clean_s:.0f} s, ratio "
        f"{faulty_s / clean_s:.2f}; {faulty_steps} steps computed for {steps}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--skip-goodput", action="store_true")
    parser.add_argument("--only-restarts", action="store_true", help="restart-to-resume and the restart paths only")
    args = parser.parse_args()
    if not args.only_restarts:
        warm_start()
    with node.running() as tier, tempfile.TemporaryDirectory() as home, tier.api_client() as api:
        install_chart(tier, Path(home))
        core = client.CoreV1Api(api)
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="bench")))
        h = Harness(api, "bench", OperatorPodLog(core))
        restart_to_resume(tier, h)
        restart_paths(tier, h)
        if not args.skip_goodput and not args.only_restarts:
            goodput(tier, h)


if __name__ == "__main__":
    main()
