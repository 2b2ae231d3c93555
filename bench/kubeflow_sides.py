"""The sides of bench/bench_kubeflow.py: our operator and Kubeflow's training-operator, each with how to run it,
write its job, read its job's status, and tell when a failed rank's gang runs again."""

import urllib.request
from pathlib import Path
from typing import Any, Protocol

from bench import kubeflow
from bench.kubeflow_books import PodBook
from bench.kubeflow_plane import KUBEFLOW_USER, OURS_USER
from testbed.controlplane import ControlPlane
from testbed.operator import OperatorProcess
from testbed.processes import Server, poll_until

import trainingjob
from trainingjob.model import GROUP, PLURAL, VERSION

Json = dict[str, Any]
OURS, KF_UNTHROTTLED, KF_DEFAULT = "ours", "kubeflow-unthrottled", "kubeflow-default"
SIDES = (OURS, KF_UNTHROTTLED, KF_DEFAULT)
IMAGE = "ghcr.io/trainingjob/trainer:0.1.0"  # kwok runs no containers: any name will do


class OperatorRun(Protocol):
    """A started operator process: ours (OperatorProcess) or Kubeflow's (kubeflow.KubeflowOperator)."""

    server: Server | None

    def stop(self) -> None: ...


class Contender:
    """One side: how to run the operator, write its job, and read its job's status."""

    key: str
    user: str
    group: str
    version: str
    plural: str
    restart_for_idle = False
    all_logs: list[Path]
    process: OperatorRun | None

    def start(self, plane: ControlPlane, log_dir: Path, *, idle: bool = False) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None

    def pid(self) -> int:
        assert self.process is not None and self.process.server is not None
        return self.process.server.process.pid

    def reconciles(self) -> int:
        raise NotImplementedError

    def logs(self) -> list[Path]:
        return self.all_logs

    def manifest(self, name: str, ranks: int) -> Json:
        raise NotImplementedError

    def says_running(self, job: Json) -> bool:
        raise NotImplementedError

    def failing_pod(self, job: str) -> str:
        """The pod of rank 1 of the job's first attempt."""
        raise NotImplementedError

    def gang_back(self, book: PodBook, failed_uid: str, ranks: int) -> bool:
        """Every rank Running again after `failed_uid` failed."""
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


class Ours(Contender):
    key, user, group, version, plural = OURS, OURS_USER, GROUP, VERSION, PLURAL
    restart_for_idle = True  # the reads-per-reconcile window runs it with TJ_OPERATOR_RESYNC_SECONDS=1

    def __init__(self, workers: int) -> None:
        self.settings = {
            "TJ_OPERATOR_WORKERS": str(workers),
            "TJ_OPERATOR_RESYNC_SECONDS": "60",  # the default
            "TJ_OPERATOR_BACKOFF_BASE_SECONDS": "0.1",  # default 10: would add 10 s to every restart
            "TJ_OPERATOR_BACKOFF_MAX_SECONDS": "300",  # the default
            "TJ_OPERATOR_LEADER_ELECTION": "false",  # one replica, as Kubeflow runs (its default)
            "TJ_OPERATOR_READ_PROGRESS": "true",  # the default
        }
        self.process: OperatorProcess | None = None
        self.all_logs: list[Path] = []

    def start(self, plane: ControlPlane, log_dir: Path, *, idle: bool = False) -> None:
        kubeconfig = plane.user_kubeconfig(self.user, ("system:masters",))
        extra = {"TJ_OPERATOR_RESYNC_SECONDS": "1"} if idle else {}
        log_dir = log_dir / ("ours-idle" if idle else "ours")  # each start logs to operator-1.log
        log_dir.mkdir(exist_ok=True)
        process = self.process = OperatorProcess(kubeconfig, log_dir, **(self.settings | extra))
        process.start()
        assert process.server is not None
        self.all_logs.append(process.server.log_path)
        server = process.server

        def answering() -> bool:
            server.check_alive()
            return process.reconciles() >= 0

        poll_until(answering, timeout=120, what="our operator's /metrics")

    def reconciles(self) -> int:
        assert self.process is not None
        return self.process.reconciles()

    def manifest(self, name: str, ranks: int) -> Json:
        return {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "TrainingJob",
            "metadata": {"name": name},
            "spec": {"workers": {"replicas": ranks}, "trainer": {"steps": 100}},
        }

    def says_running(self, job: Json) -> bool:
        return bool((job.get("status") or {}).get("phase") == "Running")

    def failing_pod(self, job: str) -> str:
        return f"{job}-worker-1-1"

    def gang_back(self, book: PodBook, failed_uid: str, ranks: int) -> bool:
        return book.running_by_attempt["2"] >= ranks  # the whole gang again, as attempt 2

    def describe(self) -> str:
        settings = " ".join(f"{k}={v}" for k, v in self.settings.items())
        return f"`python -m trainingjob` {trainingjob.__version__}, {settings}; logs at INFO (its default, text)"


class Kubeflow(Contender):
    user, group, version, plural = KUBEFLOW_USER, kubeflow.GROUP, kubeflow.VERSION, kubeflow.PLURAL

    def __init__(self, key: str, *, unthrottled: bool, threads: int, folder: Path) -> None:
        self.key, self.threads, self.folder = key, threads, folder
        self.qps: float | None = kubeflow.UNTHROTTLED_QPS if unthrottled else None
        self.burst: int | None = kubeflow.UNTHROTTLED_BURST if unthrottled else None
        self.process: kubeflow.KubeflowOperator | None = None
        self.all_logs: list[Path] = []

    def start(self, plane: ControlPlane, log_dir: Path, *, idle: bool = False) -> None:
        kubeconfig = plane.user_kubeconfig(self.user, ("system:masters",))
        self.process = kubeflow.KubeflowOperator(
            kubeconfig,
            log_dir,
            qps=self.qps,
            burst=self.burst,
            threads=self.threads,
            log_level="info",
            folder=self.folder,
        )
        self.process.start()
        assert self.process.server is not None
        self.all_logs.append(self.process.server.log_path)

    def reconciles(self) -> int:
        """controller-runtime's reconcile count of the PyTorchJob controller (its /metrics)."""
        assert self.process is not None
        url = f"http://127.0.0.1:{self.process.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
        prefix = 'controller_runtime_reconcile_total{controller="pytorchjob-controller"'
        return int(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix)))

    def manifest(self, name: str, ranks: int) -> Json:
        return kubeflow.pytorchjob(name, ranks, IMAGE)

    def says_running(self, job: Json) -> bool:
        conditions = (job.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Running" and c.get("status") == "True" for c in conditions)

    def failing_pod(self, job: str) -> str:
        return f"{job}-worker-0"  # Master is rank 0, Worker 0 is rank 1

    def gang_back(self, book: PodBook, failed_uid: str, ranks: int) -> bool:
        return len(book.running) >= ranks and failed_uid not in book.running  # its replacement runs

    def describe(self) -> str:
        limit = (
            f"--kube-api-qps={round(self.qps)} --kube-api-burst={self.burst}"
            if self.qps is not None
            else "client rate limit left at its defaults (qps 20, burst 30)"
        )
        return (
            f"training-operator {kubeflow_version(self.folder)} --enable-scheme=pytorchjob --leader-elect=false "
            f"--controller-threads={self.threads} --zap-log-level=info, {limit}"
        )


def kubeflow_version(folder: Path) -> str:
    return folder.name.split("_")[0].removeprefix("kubeflow-")
