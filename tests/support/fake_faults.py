"""What a real apiserver and a real node do that a tidy one does not, for the FakeCluster: an answer of 429 or
5xx to any write, a write that happened though its answer was lost (the operator sees an error, the cluster has
the change), foreign scheduling gates (Kueue's), an injected sidecar that keeps a pod Running after its trainer
ended, and per-node clock skew in the times a pod reports. Each is off until a test turns it on."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from trainingjob.children.naming import CONTAINER_NAME, INDEX_LABEL

Manifest = dict[str, Any]
SIDECAR = "istio-proxy"
FOREIGN_GATE = "kueue.x-k8s.io/admission"
FOREIGN_FINALIZER = "example.com/holder"
LOST = "lost"  # the write happened, its answer never came


class ApiError(Exception):
    """The apiserver answered 429 or 5xx, or no answer came: the reconcile ends and is retried later."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status


@dataclass
class ApiFaults:
    """One fault at the `after`-th write from now: an error instead of the write (429, 500, 503), or the write done
    and its answer lost. `lost_writes` counts the writes whose answer was lost, `failed` those refused."""

    after: int | None = None
    kind: str = "429"
    losing: bool = False
    lost_writes: int = 0
    failed: int = 0

    def before(self) -> None:
        """Called before each write: raise the error, or mark the write's answer to be lost."""
        if self.after is None:
            return
        if self.after > 0:
            self.after -= 1
            return
        self.after = None
        if self.kind == LOST:
            self.losing = True
            return
        self.failed += 1
        raise ApiError(int(self.kind), "the apiserver is busy" if self.kind == "429" else "internal error")

    def answer(self) -> None:
        """Called once a write took effect: its answer is lost when that was the fault."""
        if self.losing:
            self.losing = False
            self.lost_writes += 1
            raise ApiError(504, "the write was applied but its answer was lost")


@dataclass
class Nodes:
    """The nodes pods land on, each with its clock's offset from the true time (seconds, + ahead, - behind)."""

    skew: dict[str, float] = field(default_factory=dict)
    sidecars: bool = False  # a mesh injects a sidecar into every pod created from now on
    foreign_gate: bool = False  # a queue controller gates every pod created from now on
    finalizer: bool = False  # a foreign controller puts its finalizer on every pod created from now on

    def clock(self, node: str, now: datetime) -> datetime:
        return now + timedelta(seconds=self.skew.get(node, 0.0))

    def admit(self, pod: Manifest) -> None:
        """What webhooks do to a pod as it is created: inject a sidecar, add a foreign scheduling gate."""
        spec = pod.setdefault("spec", {})
        if self.sidecars:
            spec["containers"] = [*spec.get("containers", []), {"name": SIDECAR, "image": "proxy:1"}]
        if self.foreign_gate:
            spec["schedulingGates"] = [*spec.get("schedulingGates", []), {"name": FOREIGN_GATE}]
        if self.finalizer:
            hold(pod)


def has_sidecar(pod: Manifest) -> bool:
    return any(c.get("name") == SIDECAR for c in pod.get("spec", {}).get("containers", []))


def running_containers(pod: Manifest, started: str) -> list[Manifest]:
    """The container statuses of a running pod: the trainer's and its sidecar's, when it has one."""
    names = [CONTAINER_NAME, *([SIDECAR] if has_sidecar(pod) else [])]
    return [{"name": n, "state": {"running": {"startedAt": started}}} for n in names]


def ended_containers(pod: Manifest, terminated: Manifest, sidecar_runs: bool) -> list[Manifest]:
    """The trainer's terminated state, and its sidecar's (running on, or ended with the pod)."""
    trainer = {"name": CONTAINER_NAME, "state": {"terminated": terminated}}
    if not has_sidecar(pod):
        return [trainer]
    state = {"running": {}} if sidecar_runs else {"terminated": {"exitCode": 0, "reason": "Completed"}}
    return [trainer, {"name": SIDECAR, "state": state}]


def node_of(pod: Manifest) -> str:
    """The node the scheduler places a pod on: by its replica index, two nodes in all."""
    return f"node-{int(pod['metadata']['labels'][INDEX_LABEL]) % 2}"


def sidecar_ends(pod: Manifest) -> None:
    """The sidecar of a pod whose trainer ended stops too: the pod takes the trainer's end as its phase."""
    status = pod["status"]
    trainer: Manifest = next((c for c in status.get("containerStatuses", []) if c["name"] == CONTAINER_NAME), {})
    terminated = trainer.get("state", {}).get("terminated")
    if has_sidecar(pod) and terminated is not None and status.get("phase") == "Running":
        status["phase"] = "Succeeded" if terminated["exitCode"] == 0 else "Failed"
        status["containerStatuses"] = ended_containers(pod, terminated, sidecar_runs=False)


def hold(pod: Manifest) -> None:
    """A foreign controller (a mesh, a backup tool, Kueue) puts its finalizer on a pod."""
    held = pod["metadata"].get("finalizers") or []
    pod["metadata"]["finalizers"] = [*held, *([] if FOREIGN_FINALIZER in held else [FOREIGN_FINALIZER])]


def lift_gate(pod: Manifest) -> None:
    """The foreign controller (Kueue) removes its scheduling gate."""
    pod["spec"]["schedulingGates"] = [g for g in pod["spec"].get("schedulingGates", []) if g["name"] != FOREIGN_GATE]


def foreign_gated(pod: Manifest) -> bool:
    return any(g.get("name") == FOREIGN_GATE for g in pod.get("spec", {}).get("schedulingGates", []))


def missing_secrets(pod: Manifest, secrets: set[str]) -> list[str]:
    """The Secrets a pod mounts that do not exist: the kubelet cannot start it (CreateContainerConfigError)."""
    volumes = pod.get("spec", {}).get("volumes", [])
    return [n for v in volumes if (n := (v.get("secret") or {}).get("secretName")) and n not in secrets]
