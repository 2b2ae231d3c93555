"""`make demo-cluster` / `make demo-cluster-down`: the node tier for people, with the chart installed from our
images and the main job run on it: digits DDP, rank 1 killed part-way, the gang resumed from its checkpoint.

`up` starts a detached keeper that brings the tier up, runs the demo (its lines are printed as they come) and
keeps the cluster until `down` sends it SIGTERM; the keeper then puts the machine back as it was."""

import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from kubernetes import client

from testbed import node
from testbed.devcluster import command_line, stop_keeper
from testbed.harness import Harness
from testbed.node import NodeTier
from testbed.node_cluster import RELEASE, SYSTEM_NAMESPACE, OperatorPodLog, install_chart, signal_container
from testbed.node_jobs import (
    apply_claim,
    at_step,
    example,
    last_step,
    log_of,
    pod_of,
    result_accuracy,
    resumed_steps,
)
from testbed.processes import poll_until

NAMESPACE = "demo"
READY, FAILED = "ready", "failed"
KILL_AT = 250  # as `make demo` does (there the rank stops itself at the step; here we watch rank 0's reports)
HOW_TO_USE = """The cluster stays up. In a shell, from the repository root:
  export KUBECONFIG={folder}/kubeconfig PATH={folder}/bin:$PATH   # its kubectl and helm
  kubectl get tj,pods -n {ns}
  helm status {release} -n {system}   # the chart's notes: a first job of your own, the REST API and a token
Take it down (and put the machine back as it was) with: make demo-cluster-down"""


def say(line: str) -> None:
    print(f"[demo-cluster] {line}", flush=True)


def run_demo(tier: NodeTier) -> None:
    """examples/digits-ddp.yaml (and its claim, provisioned by the default StorageClass) as shipped; rank 1 is
    killed once a checkpoint exists."""
    started = time.monotonic()
    with tier.api_client() as api:
        core = client.CoreV1Api(api)
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NAMESPACE)))
        h = Harness(api, NAMESPACE, OperatorPodLog(core))
        apply_claim(h, "digits-ddp-checkpoints.yaml")
        job = example("digits-ddp.yaml")[0]
        h.create(job)
        name = job["metadata"]["name"]
        say(f"{name}: 2 DDP ranks in real containers; worker-1 is killed once rank 0 reports step {KILL_AT}")
        at_step(h, name, 1, KILL_AT)
        signal_container(tier, pod_of(h, name, "worker", 1, attempt=1), signal.SIGKILL)
        reached = last_step(h, name, 1)
        say(f"worker-1 killed (SIGKILL); the gang had reached step {reached}")
        done = h.wait(name, lambda j: j.get("status", {}).get("phase") in ("Succeeded", "Failed"), "the end", 900)
        status = done["status"]
        rank0 = log_of(h, pod_of(h, name, "worker", 0, attempt=status["attempt"]))
        resumed = resumed_steps(rank0)
        say(f"phase {status['phase']} after {time.monotonic() - started:.0f} s, attempt {status['attempt']}")
        failure = status.get("lastFailure") or {}
        say(f"restarts {status['restarts']}; last failure: {failure.get('pod')} exit {failure.get('exitCode')}")
        if resumed:
            say(f"attempt {status['attempt']} resumed from step {resumed[0]}: {reached - resumed[0]} steps redone")
        else:
            say(f"attempt {status['attempt']} started over from step 0")
        if status["phase"] == "Succeeded":
            say(f"test accuracy {result_accuracy(status):.4f} (status.result)")


def _keep(folder: Path) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with node.running() as tier:
        install_chart(tier, folder / "helm")
        shutil.copy(tier.plane.kubeconfig, folder / "kubeconfig")
        tier.plane.link_binaries(folder / "bin")  # kubectl and helm among them
        try:
            run_demo(tier)
        except Exception as error:
            say(f"the demo failed: {error}")
            (folder / FAILED).touch()
        (folder / READY).touch()
        stop.wait()
    say("the cluster is down and the machine is as it was")


def up(folder: Path) -> None:
    down(folder, quiet=True)
    for leftover in (READY, FAILED, "kubeconfig"):
        (folder / leftover).unlink(missing_ok=True)
    log_path = folder / "keeper.log"
    with log_path.open("wb") as log:
        keeper = subprocess.Popen(
            [sys.executable, "-m", "testbed.demo_cluster", "keep", "--dir", str(folder)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
    (folder / "keeper.pid").write_text(f"{keeper.pid}\n")
    shown = 0

    def finished() -> bool:
        nonlocal shown
        lines = log_path.read_text(errors="replace").splitlines()
        for line in lines[shown:]:
            if line.startswith("[demo-cluster]") or "ERROR" in line:
                print(line, flush=True)
        shown = len(lines)
        if keeper.poll() is not None:
            raise RuntimeError(f"the demo cluster stopped; its log is {log_path}")
        return (folder / READY).exists()

    poll_until(finished, timeout=1800, interval=0.5, what="the demo cluster")
    print(HOW_TO_USE.format(folder=folder.resolve(), ns=NAMESPACE, release=RELEASE, system=SYSTEM_NAMESPACE))
    if (folder / FAILED).exists():
        sys.exit(1)


def down(folder: Path, quiet: bool = False) -> None:
    stop_keeper(folder, timeout=120)
    if not quiet:
        print("demo cluster down")


if __name__ == "__main__":
    command_line(__doc__ or "", ".demo-cluster", {"up": up, "down": down, "keep": _keep})
