"""Local mode: the reconcile.Cluster protocol on this machine, each pod a local process, no Kubernetes at all.

The same planner and reconcile run over it, so restarts, checkpoint resume, backoff and deadlines behave as
on a cluster. Ranks talk over loopback; the checkpoint volume is a folder of the work directory, shared by
every rank and kept across attempts.
"""

import contextlib
import copy
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trainingjob.children import contract
from trainingjob.children.access import KEY_BYTES
from trainingjob.children.agent import Gang
from trainingjob.children.naming import ATTEMPT_LABEL
from trainingjob.children.progress_report import Report, parse_report
from trainingjob.children.specs import TRAINER_COMMAND
from trainingjob.kube.agents import read_gang, send_order
from trainingjob.kube.ports import Created, Gone
from trainingjob.local.capacity import Capacity, Waiting, is_worker
from trainingjob.local.files import ConfigMaps, mount_folders, relocate
from trainingjob.local.pod import LOOPBACK, LocalPod, Manifest, interrupt_deferred, now_stamp
from trainingjob.model import TrainingJobStatus
from trainingjob.plan import Event, Settings
from trainingjob.reconcile.job import reconcile

BESIDE_PYTHON = Path(sys.executable).parent  # the environment's scripts (torchrun)

# A checkout's trainer package; installed from the wheel, `trainer` sits beside `trainingjob` and needs no path.
TRAINER_PATH = Path(__file__).resolve().parents[3] / "trainer-image"
GRACE_SECONDS = 30.0
LOCAL_NODE = "localhost"  # the node a local pod runs on: this machine


def merge_patched(target: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """`target` with a JSON merge patch (RFC 7386) applied, as the apiserver applies one."""
    result = dict(target)
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, Mapping):
            current = result.get(key)
            result[key] = merge_patched(current if isinstance(current, Mapping) else {}, value)
        else:
            result[key] = value
    return result


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LocalCluster:
    """One job and its pods on this machine. `on_event` receives every Event the planner emits."""

    job: Manifest
    workdir: Path
    on_event: Any = print
    pods: dict[str, LocalPod] = field(default_factory=dict)
    service: bool = False
    deleted: bool = False
    ports: dict[str, list[int]] = field(default_factory=dict)
    pause_at: dict[str, int] = field(default_factory=dict)  # pod -> the step after which its trainer stops itself
    configmaps: ConfigMaps = field(default_factory=dict)  # the ConfigMaps beside the job's manifest
    agent_ports: dict[str, int] = field(default_factory=dict)  # pod -> its agent's loopback port
    checkpoints: Path | None = None  # the checkpoint folder; <workdir>/checkpoints when None
    waiting: Waiting | None = None  # --capacity: worker pods beyond it wait, unschedulable (local/capacity.py)

    def __post_init__(self) -> None:
        metadata = self.job.setdefault("metadata", {})
        metadata.setdefault("namespace", "local")
        metadata.update(uid=str(uuid.uuid4()), resourceVersion="1", generation=1, creationTimestamp=now_stamp())
        # The pods' paths (key, progress, checkpoints) must hold from a role's workingDir too: make them absolute.
        self.workdir = self.workdir.absolute()
        (self.workdir / "logs").mkdir(parents=True, exist_ok=True)

    @property
    def checkpoint_dir(self) -> Path:
        return self.checkpoints or self.workdir / "checkpoints"

    def read_job(self, namespace: str, name: str) -> Manifest | None:
        return None if self.deleted else copy.deepcopy(self.job)

    def list_pods(self, namespace: str, job: str) -> list[Manifest]:
        self._reap()
        if self.waiting is not None:
            step = int(((self.job.get("status") or {}).get("progress") or {}).get("step") or 0)
            self.waiting.step = max(self.waiting.step, step)  # the furthest it got: an attempt resumed before stays
            self._lose_workers_beyond(self.waiting.slots)
        waiting = self.waiting.placeable(self._running_workers()) if self.waiting else []
        for manifest in waiting:  # a slot is free: the scheduler places the pod that waited longest
            self._start(manifest)
        held = [copy.deepcopy(pod) for pod in self.waiting.pods.values()] if self.waiting else []
        return [pod.as_manifest() for pod in self.pods.values()] + held

    def _running_workers(self) -> int:
        return sum(1 for pod in self.pods.values() if is_worker(pod.manifest) and pod.process.poll() is None)

    def _lose_workers_beyond(self, slots: int) -> None:
        """Fewer slots than running workers: the last of them go as with a lost node (killed, and gone at once)."""
        running = [p for p in self.pods.values() if is_worker(p.manifest) and p.process.poll() is None]
        for pod in sorted(running, key=lambda p: p.name)[slots:]:
            self._signal(pod, signal.SIGKILL)
            pod.process.wait()
            del self.pods[pod.name]

    def spare(self, pod: Manifest, at_most: int) -> int:
        """The room for more workers (kube/ports.Room): free --capacity slots no waiting pod takes."""
        return min(self.waiting.spare(self._running_workers()), at_most) if self.waiting else 0

    def read_service(self, namespace: str, job: str) -> Manifest | None:
        if not self.service:
            return None
        return {
            "metadata": {"name": job, "ownerReferences": [{"uid": self.job["metadata"]["uid"], "controller": True}]}
        }

    def log_tail(self, namespace: str, pod: str, lines: int) -> str:
        found = self.pods.get(pod)
        if found is None or not found.log_path.exists():
            return ""
        return "\n".join(found.log_path.read_text(errors="replace").splitlines()[-lines:])

    def progress(self, pod: Manifest) -> Report:
        found = self.pods.get(pod["metadata"]["name"])
        try:
            return parse_report(found.progress_path.read_bytes()) if found else (None, None)
        except OSError:
            return None, None

    def departed(self, namespace: str, pod: str) -> tuple[str, Report] | None:
        return None  # a local rank's progress file outlives its process: progress() reads it

    def gang(self, pod: Manifest) -> Gang | None:
        port = self.agent_ports.get(pod["metadata"]["name"])
        return read_gang(LOOPBACK, port) if port is not None else None

    def order(self, pod: Manifest, job_uid: str, attempt: int, pacing: str | None = None) -> bool:
        port = self.agent_ports.get(pod["metadata"]["name"])
        return port is not None and send_order(LOOPBACK, self.key_file.read_bytes(), attempt, port, pacing=pacing)

    def ask_checkpoint(self, pod: Manifest, job_uid: str, attempt: int, after_step: int) -> bool:
        port = self.agent_ports.get(pod["metadata"]["name"])
        key = self.key_file.read_bytes()
        return port is not None and send_order(LOOPBACK, key, attempt, port, checkpoint_after=after_step)

    def report(self, pod: str) -> Manifest:
        """The raw progress report of a pod (accuracy and the like), or {}."""
        found = self.pods.get(pod)
        with contextlib.suppress(OSError, ValueError, AttributeError):
            return dict(json.loads(found.progress_path.read_text()))  # type: ignore[union-attr]
        return {}

    def write_status(self, namespace: str, name: str, resource_version: str, patch: Manifest) -> str:
        if self.deleted:
            raise Gone(name)
        self.job["status"] = merge_patched(self.job.get("status") or {}, patch)
        self.job["metadata"]["resourceVersion"] = str(int(resource_version) + 1)
        return str(self.job["metadata"]["resourceVersion"])

    def create(self, namespace: str, manifests: Sequence[Manifest]) -> Created:
        created = {}
        for manifest in manifests:
            if manifest["kind"] == "Service":
                self.service = True
            elif manifest["kind"] == "Secret":
                self._write_key()
            elif manifest["kind"] == "Pod" and manifest["metadata"]["name"] not in self.pods:
                full = self.waiting is not None and self._running_workers() >= self.waiting.slots
                held = self.waiting if full and is_worker(manifest) else None
                created[manifest["metadata"]["name"]] = held.hold(manifest) if held else self._start(manifest)
        return Created(created)

    def delete_pods(self, namespace: str, pods: Mapping[str, str], *, force: bool = False) -> None:
        """SIGTERM now (the trainer checkpoints and exits 79); SIGKILL after the grace period, or at once. Only the
        pod of the UID it was observed with: a namesake started since is left alone."""
        for name, uid in pods.items():
            if self.waiting is not None and self.waiting.drop(name, uid):
                continue
            pod = self.pods.get(name)
            if pod is not None and pod.uid == uid and (pod.deleted_at is None or force):
                pod.deleted_at = pod.deleted_at or datetime.now(UTC).timestamp()
                self._signal(pod, signal.SIGKILL if force else signal.SIGTERM)

    def release_pods(self, namespace: str, pods: Mapping[str, str]) -> None:
        """A local process goes when it ends: the finalizer is only taken off the record."""
        for name, uid in pods.items():
            pod = self.pods.get(name)
            if pod is not None and pod.uid == uid:
                pod.manifest["metadata"].pop("finalizers", None)

    def ungate(self, namespace: str, pods: Mapping[str, str]) -> None:
        """Local processes start at once; the gate is only taken off the record (of the pod of that UID)."""
        for name, uid in pods.items():
            if name in self.pods and self.pods[name].uid == uid:
                self.pods[name].manifest["spec"].pop("schedulingGates", None)

    def delete_job(self, namespace: str, name: str, uid: str, resource_version: str | None = None) -> None:
        """The job goes, when it is the one of this UID (and version, when given)."""
        metadata = self.job["metadata"]
        if metadata["uid"] == uid and resource_version in (None, metadata["resourceVersion"]):
            self.deleted = True

    def emit(self, job: Manifest, events: Sequence[Event]) -> None:
        for event in events:
            self.on_event(event)

    @staticmethod
    def _signal(pod: LocalPod, signum: int) -> None:
        """SIGTERM goes to the pod's process group (an agent passes it on); SIGKILL to every process of the pod."""
        if signum == signal.SIGKILL:
            pod.signal_all(signum)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pod.process.pid, signum)

    def kill(self, pod: str) -> None:
        """SIGKILL the trainer that stopped itself (the pod's agent lives on and restarts it in place), else the
        pod's processes, as a crash or the OOM killer would."""
        local = self.pods.get(pod)
        stopped = local.stopped_process() if local else None
        if stopped is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(stopped, signal.SIGKILL)
        elif local is not None:
            self._signal(local, signal.SIGKILL)

    def stopped(self, pod: str) -> bool:
        """Whether a pod's trainer has stopped itself (SIGSTOP) and waits to be killed."""
        local = self.pods.get(pod)
        return local is not None and local.process.poll() is None and local.stopped_process() is not None

    def stopped_pods(self) -> list[str]:
        """The pods whose process has stopped itself and waits: to be killed (--kill), or continued."""
        return [name for name in self.pods if self.stopped(name)]

    def resume(self, pod: str) -> None:
        """Continue (SIGCONT) a pod's process that stopped itself; one stopped with a SIGTERM pending acts on it."""
        if pod in self.pods:
            self.pods[pod].signal_all(signal.SIGCONT)

    def stop_all(self) -> None:
        for pod in self.pods.values():
            self._signal(pod, signal.SIGKILL)
            pod.process.wait()

    def _reap(self) -> None:
        now = datetime.now(UTC).timestamp()
        for name, pod in list(self.pods.items()):
            if pod.deleted_at is None:
                continue
            if pod.process.poll() is None and now - pod.deleted_at > GRACE_SECONDS:
                self._signal(pod, signal.SIGKILL)
            if pod.process.poll() is not None:
                del self.pods[name]

    @property
    def key_file(self) -> Path:
        return self.workdir / "job.key"

    def _write_key(self) -> None:
        """The job's key, readable by this user only; kept across runs in the same work directory."""
        if not self.key_file.exists():
            self.key_file.touch(mode=0o600)
            self.key_file.write_bytes(secrets.token_bytes(KEY_BYTES))

    def _ports_for(self, attempt: str, count: int) -> list[int]:
        """Fresh loopback ports per attempt: the rendezvous port, then one per parameter server."""
        return self.ports.setdefault(attempt, [_free_port() for _ in range(count)])

    def _environment(self, manifest: Manifest) -> dict[str, str]:
        """The pod's variables, pointed at this machine: loopback ports, the work folder, the local key."""
        container = manifest["spec"]["containers"][0]
        env = {item["name"]: item["value"] for item in container.get("env", []) if "value" in item}
        refs = [item["name"] for item in container.get("env", []) if "value" not in item]
        if refs:
            raise ValueError(f"local mode cannot resolve valueFrom of env {refs}: give them a value")
        if container.get("envFrom") or manifest["spec"].get("initContainers"):
            raise ValueError("local mode runs the trainer's container alone: no envFrom, initContainers or sidecars")
        name = manifest["metadata"]["name"]
        ports = self._ports_for(env[contract.ATTEMPT], 1 + int(env[contract.NUM_PS]))
        env.update(
            {
                contract.MASTER_ADDR: "127.0.0.1",
                contract.PET_MASTER_ADDR: "127.0.0.1",
                contract.MASTER_PORT: str(ports[0]),
                contract.PET_MASTER_PORT: str(ports[0]),
                contract.PS_ADDRS: ",".join(f"127.0.0.1:{port}" for port in ports[1:]),
                contract.PROGRESS_PORT: "0",
                contract.PROGRESS_FILE: str(self.workdir / "logs" / f"{name}.progress.json"),
                contract.JOB_KEY_FILE: str(self.key_file),
                contract.LISTEN_ADDRESS: LOOPBACK,  # nothing of a local run is reached from another machine
            }
        )
        if contract.CHECKPOINT_DIR in env:
            env[contract.CHECKPOINT_DIR] = str(self.checkpoint_dir)
        if name in self.pause_at:
            env[contract.PAUSE_AT_STEP] = str(self.pause_at[name])
        if env.get(contract.IN_PLACE) == "1":
            rank0 = f"{env[contract.JOB_NAME]}-{contract.ROLE_WORKER}-0-{manifest['metadata']['labels'][ATTEMPT_LABEL]}"
            env[contract.AGENT_PORT] = str(self.agent_ports.setdefault(name, _free_port()))
            env[contract.AGENT_COORDINATOR] = f"{LOOPBACK}:{self.agent_ports.setdefault(rank0, _free_port())}"
        return env

    def _start(self, manifest: Manifest) -> str:
        container, name = manifest["spec"]["containers"][0], manifest["metadata"]["name"]
        folders = mount_folders(manifest["spec"], self.configmaps, self.workdir)
        env = {key: relocate(value, folders) for key, value in self._environment(manifest).items()}
        command = [relocate(part, folders) for part in [*container["command"], *container.get("args", [])]]
        if command[: len(TRAINER_COMMAND)] == list(TRAINER_COMMAND) or command[0] in ("python", "python3"):
            command[0] = sys.executable
        elif command[0] == "torchrun" and (BESIDE_PYTHON / "torchrun").exists():
            command[0] = str(BESIDE_PYTHON / "torchrun")  # the environment's, as in the image
        checkout = str(TRAINER_PATH) if TRAINER_PATH.is_dir() else ""
        path = os.pathsep.join(filter(None, [checkout, os.environ.get("PYTHONPATH", "")]))
        log_path = self.workdir / "logs" / f"{name}.log"
        Path(env[contract.PROGRESS_FILE]).unlink(missing_ok=True)  # an earlier run's, in the same work folder
        pod = copy.deepcopy(manifest)
        metadata = pod["metadata"]  # a pod that waited for a slot keeps its UID and creation (local/capacity.py)
        metadata.update(uid=metadata.get("uid") or str(uuid.uuid4()), namespace="local")
        metadata.setdefault("creationTimestamp", now_stamp())
        pod["spec"]["nodeName"] = LOCAL_NODE  # placed: the planner tells placed pods from waiting ones by it
        pod.pop("status", None)
        probed = container.get("readinessProbe") is not None  # rank 0's agent, or a parameter-server worker's
        ready_port = self.agent_ports.get(name) if probed else None
        with log_path.open("ab") as log, interrupt_deferred():
            process = subprocess.Popen(
                command,
                env={**os.environ, "PYTHONPATH": path, **env},
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=relocate(container["workingDir"], folders) if container.get("workingDir") else None,
                start_new_session=True,
            )
            self.pods[name] = LocalPod(pod, process, log_path, Path(env[contract.PROGRESS_FILE]), ready_port=ready_port)
        return str(pod["metadata"]["uid"])


@dataclass(frozen=True)
class Chaos:
    """Kill one replica's process (e.g. "worker-1") after `at_step`, in the first attempt. The built-in trainer
    stops itself right after that step and is killed then (exactly there, at any speed); a user's command is
    killed once rank 0 has reported the step."""

    replica: str
    at_step: int


def _pauses(manifest: Manifest, replica: str) -> bool:
    """Whether the chaos target stops itself after its step: the built-in trainer, one process per pod, a DDP rank
    or a parameter-server worker (a parameter server's pod is killed whole)."""
    spec = manifest.get("spec") or {}
    one_process = (spec.get("workers") or {}).get("nprocPerPod", 1) == 1
    mode, worker = spec.get("mode", "DDP"), replica.startswith(f"{contract.ROLE_WORKER}-")
    return bool(spec.get("trainer")) and (mode == "DDP" or (mode == "ParameterServer" and worker)) and one_process


def _chaos_due(cluster: LocalCluster, status: TrainingJobStatus, chaos: Chaos, pod: str) -> bool:
    if status.attempt != 1:
        return False
    if cluster.pause_at:
        return cluster.stopped(pod)
    return bool(status.progress and status.progress.step >= chaos.at_step)


def _chaos_kill(cluster: LocalCluster, pod: str, status: TrainingJobStatus, chaos: Chaos, on_event: Any) -> None:
    cluster.kill(pod)
    at = chaos.at_step if cluster.pause_at else status.progress.step if status.progress else "?"
    on_event(Event("Warning", "ChaosKill", f"Killed {pod} (SIGKILL) at step {at}."))


LOCAL_SETTINGS = Settings(
    backoff_base_seconds=1.0, backoff_max_seconds=10.0, resize_wait_seconds=5.0, resize_interval_seconds=10.0
)


def run_local(
    manifest: Manifest,
    workdir: Path,
    *,
    on_status: Any = lambda status: None,
    on_event: Any = print,
    chaos: Chaos | None = None,
    poll_seconds: float = 0.25,
    configmaps: ConfigMaps | None = None,
    settings: Settings = LOCAL_SETTINGS,
    capacity: Capacity | None = None,
) -> tuple[TrainingJobStatus | None, LocalCluster]:
    """Run one job to its end on this machine; returns its final status and the cluster (for logs/reports).
    `configmaps` (name -> data) stand in for the cluster's, for the pods' ConfigMap volumes; `settings` are the
    operator's (benchmarks change its checkpoint prior); `capacity`: worker slots over the run (by step or by
    second), at most that many worker pods run at once, the others wait unschedulable (local/capacity.py)."""
    cluster = LocalCluster(copy.deepcopy(manifest), workdir, on_event, configmaps=dict(configmaps or {}))
    cluster.waiting = Waiting(capacity) if capacity is not None else None
    name = str(cluster.job["metadata"]["name"])
    if chaos and _pauses(manifest, chaos.replica):
        cluster.pause_at[f"{name}-{chaos.replica}-1"] = chaos.at_step
    status: TrainingJobStatus | None = None
    killed = False
    try:
        while True:
            # A Ctrl-C lands between passes, as a KeyboardInterrupt: inside one, a serializer (pydantic's) would wrap
            # it in an error of its own, and the pass would stop half written.
            with interrupt_deferred():
                room = cluster if cluster.waiting is not None else None
                outcome = reconcile(cluster, "local", name, now=datetime.now(UTC), settings=settings, room=room)
                if outcome.after is None:
                    return status, cluster
                status = outcome.after
                on_status(status)
                if chaos and not killed and _chaos_due(cluster, status, chaos, f"{name}-{chaos.replica}-1"):
                    _chaos_kill(cluster, f"{name}-{chaos.replica}-1", status, chaos, on_event)
                    killed = True
                if status.phase.is_terminal and all(pod.process.poll() is not None for pod in cluster.pods.values()):
                    return status, cluster
            time.sleep(min(outcome.requeue_after or poll_seconds, poll_seconds))
    finally:
        cluster.stop_all()
