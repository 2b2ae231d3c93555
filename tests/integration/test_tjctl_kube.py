"""tjctl through a kubeconfig against the envtest apiserver: flags anywhere, list -A -l with AGE, -o name/wide/yaml,
multi-document submit with generateName, what suspend and resume say, wait's exit codes, watch following the job,
the kept log lines of a failed attempt, and every expected error as one line with its exit code. No operator runs:
the test writes the status the operator would, through the status subresource."""

import json
import re
import selectors
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from testbed.controlplane import ControlPlane
from testbed.crds import install_crd
from testbed.processes import free_port, poll_until
from tests.support.builders import job_manifest
from tests.support.cli import REPO, tjctl, tjctl_env
from tests.support.rest_api import token_kubeconfig

from trainingjob.generate import crd
from trainingjob.model import GROUP, PLURAL, VERSION
from trainingjob.model.sweep import SWEEP_PLURAL

pytestmark = pytest.mark.envtest
NOW = datetime.now(UTC).isoformat().replace("+00:00", "Z")
TIMEOUT = 30.0


def document(name: str = "", labels: dict[str, str] | None = None, prefix: str = "") -> dict[str, Any]:
    manifest = job_manifest(name or "x", labels=labels, trainer={"steps": 100})
    if prefix:
        manifest["metadata"] = {"generateName": prefix, **({"labels": labels} if labels else {})}
    return manifest


class Cluster:
    """tjctl with the admin kubeconfig and a namespace, and the admin's hands for what the operator would do."""

    def __init__(self, plane: ControlPlane, namespace: str, api: client.ApiClient) -> None:
        self.plane, self.namespace = plane, namespace
        self.custom = client.CustomObjectsApi(api)

    def run(self, *args: str, **options: Any) -> subprocess.CompletedProcess[str]:
        """tjctl ARGS with the cluster's flags after the command, as people type them."""
        return tjctl(*args, "--kubeconfig", str(self.plane.kubeconfig), "-n", self.namespace, **options)

    def submit(self, *manifests: dict[str, Any]) -> None:
        for manifest in manifests:
            self.custom.create_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, manifest)

    def set_status(self, name: str, status: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, self.namespace, PLURAL, name, {"status": status}
        )

    def spec(self, name: str) -> dict[str, Any]:
        return dict(self.custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name)["spec"])


@pytest.fixture
def kube(trainingjob_crd: ControlPlane, envtest_ns: str) -> Iterator[Cluster]:
    with trainingjob_crd.api_client() as api:
        yield Cluster(trainingjob_crd, envtest_ns, api)


def running(step: int = 10, **more: Any) -> dict[str, Any]:
    progress = {"step": step, "totalSteps": 100, "percent": step, "loss": 0.5}
    return {"phase": "Running", "attempt": 1, "startTime": NOW, "progress": progress, **more}


def failure(attempt: int, pod: str, tail: str = "") -> dict[str, Any]:
    return {
        "pod": pod, "attempt": attempt, "failureClass": "OOMKilled", "reason": "OOMKilled", "exitCode": 137,
        "time": NOW, "logTail": tail,
    }  # fmt: skip


def table(text: str) -> list[dict[str, str]]:
    """A printed table's rows by column, cut where each header starts (a cell may be empty)."""
    header, *rows = text.splitlines()
    starts = [found.start() for found in re.finditer(r"\S+", header)]
    cuts = list(zip(starts, [*starts[1:], None], strict=True))
    return [{header[a:b].strip(): row[a:b].strip() for a, b in cuts} for row in [header, *rows]][1:]


def one_error_line(result: subprocess.CompletedProcess[str], code: int, *words: str) -> str:
    """The command failed with `code` and said so in one line on stderr, naming `words`, without a traceback."""
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    for word in words:
        assert word in result.stderr, result.stderr
    return result.stderr


def test_submit_every_document_then_list_get_and_print_them_as_asked(kube: Cluster, tmp_path: Path) -> None:
    jobs = [document("alpha", {"team": "vision"}), document(prefix="sweep-", labels={"team": "nlp"})]
    jobs.append(document("beta", {"team": "vision"}))
    file = tmp_path / "jobs.yaml"
    file.write_text(yaml.safe_dump_all(jobs))
    submitted = kube.run("submit", str(file))
    assert submitted.returncode == 0, submitted.stderr
    created = re.findall(r"^trainingjob\.trainingjob\.io/(\S+) created$", submitted.stdout, re.MULTILINE)
    assert created[0] == "alpha" and re.fullmatch(r"sweep-[a-z0-9]{5}", created[1]) and created[2] == "beta"
    from_stdin = kube.run("submit", "-f", "-", "-o", "name", stdin=yaml.safe_dump(document("gamma")))
    assert from_stdin.stdout == "trainingjob.trainingjob.io/gamma\n", from_stdin.stderr
    got = kube.run("get", "alpha", "-o", "json")
    assert json.loads(got.stdout)["metadata"]["labels"] == {"team": "vision"}, got.stderr
    before = tjctl("--kubeconfig", str(kube.plane.kubeconfig), "-n", kube.namespace, "-o", "yaml", "get", "alpha")
    assert yaml.safe_load(before.stdout) == json.loads(got.stdout)
    names = kube.run("list", "-l", "team=vision", "-o", "name")
    assert names.stdout.split() == ["trainingjob.trainingjob.io/alpha", "trainingjob.trainingjob.io/beta"]
    everything = yaml.safe_load(kube.run("list", "-o", "yaml").stdout)
    assert everything["kind"] == "List" and len(everything["items"]) == 4


def test_list_all_namespaces_with_a_selector_and_the_age_and_wide_columns(kube: Cluster) -> None:
    other = f"{kube.namespace[:50]}-b"
    with kube.plane.api_client() as api:
        client.CoreV1Api(api).create_namespace(client.V1Namespace(metadata={"name": other}))
        try:
            kube.submit(document("here", {"team": "vision"}), document("skipped", {"team": "nlp"}))
            kube.custom.create_namespaced_custom_object(
                GROUP, VERSION, other, PLURAL, document("there", {"team": "vision"})
            )
            kube.set_status("here", running(40, lastCheckpoint={"step": 30, "path": "/c/step-30", "time": NOW},
                                            lastFailure=failure(1, "here-worker-1-1")))  # fmt: skip
            listed = kube.run("list", "-A", "-l", "team=vision")
            assert listed.stdout.split()[:2] == ["NAMESPACE", "NAME"], listed.stdout
            rows = table(listed.stdout)
            mine = {(row["NAMESPACE"], row["NAME"]) for row in rows}
            assert {(kube.namespace, "here"), (other, "there")} <= mine and (kube.namespace, "skipped") not in mine
            assert all(re.fullmatch(r"\d+s|\d+m\d*s?", row["AGE"]) for row in rows), listed.stdout
            (cells,) = table(kube.run("list", "-o", "wide", "-l", "team=vision").stdout)
            assert (cells["PHASE"], cells["STEP"], cells["PROGRESS"]) == ("Running", "40", "40%"), cells
            assert (cells["CHECKPOINT"], cells["FAILURE"], cells["LOSS"]) == (
                "step-30",
                "OOMKilled",
                "0.5",
            )  # as kubectl shows it
            assert "NAMESPACE" not in cells and cells["NAME"] == "here"
        finally:
            client.CoreV1Api(api).delete_namespace(other)


def test_suspend_and_resume_say_what_they_caused_not_the_phase_before(kube: Cluster) -> None:
    kube.submit(document("paused"))
    kube.set_status("paused", running(40, lastCheckpoint={"step": 30, "path": "/c/step-30", "time": NOW}))
    suspended = kube.run("suspend", "paused")
    assert suspended.stdout.strip() == "trainingjob.trainingjob.io/paused suspended: its pods checkpoint and stop"
    assert kube.spec("paused")["runPolicy"]["suspend"] is True
    again = kube.run("suspend", "paused")
    assert "was suspended already" in again.stdout and again.returncode == 0, again.stderr
    resumed = kube.run("resume", "paused")
    expected = "trainingjob.trainingjob.io/paused resumed: it starts again from its newest checkpoint (step 30)"
    assert resumed.stdout.strip() == expected, resumed.stderr
    as_json = json.loads(kube.run("suspend", "paused", "-o", "json").stdout)
    assert as_json["spec"]["runPolicy"]["suspend"] is True and as_json["status"]["phase"] == "Running"


def test_suspend_wait_returns_once_the_operator_has_suspended_the_job(kube: Cluster) -> None:
    kube.submit(document("waits"))
    kube.set_status("waits", running())
    waiting = subprocess.Popen(
        [sys.executable, "-m", "tjctl", "suspend", "waits", "--wait", "--timeout", "60s",
         "--kubeconfig", str(kube.plane.kubeconfig), "-n", kube.namespace],
        cwd=REPO, env=tjctl_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        poll_until(lambda: kube.spec("waits")["runPolicy"].get("suspend"), timeout=TIMEOUT, what="suspend set")
        assert waiting.poll() is None  # still waiting: the phase is Running
        kube.set_status("waits", {"phase": "Suspended"})
        out, err = waiting.communicate(timeout=TIMEOUT)
    finally:
        waiting.kill()
    assert waiting.returncode == 0, err
    assert (
        out.strip() == "trainingjob.trainingjob.io/waits suspended: its pods checkpointed and stopped (phase Suspended)"
    )


def test_wait_exits_0_when_reached_1_when_failed_3_on_timeout(kube: Cluster) -> None:
    kube.submit(document("done"), document("broken"), document("slow"))
    kube.set_status("done", {"phase": "Succeeded", "attempt": 1})
    kube.set_status("broken", {"phase": "Failed", "attempt": 1, "lastFailure": failure(1, "broken-worker-0-1")})
    kube.set_status("slow", running())
    reached = kube.run("wait", "done")
    assert reached.returncode == 0 and "condition met: Succeeded" in reached.stdout, reached.stderr
    assert kube.run("wait", "slow", "--for", "running").returncode == 0
    one_error_line(kube.run("wait", "broken"), 1, "'broken' failed", "broken-worker-0-1 OOMKilled")
    assert kube.run("wait", "broken", "--for", "Failed").returncode == 0
    one_error_line(kube.run("wait", "done", "--for", "Running"), 1, "finished (Succeeded) without reaching Running")
    started = time.monotonic()
    one_error_line(kube.run("wait", "slow", "--timeout", "2s"), 3, "did not reach Succeeded", "phase Running")
    assert time.monotonic() - started < TIMEOUT
    assert kube.run("wait", "slow", "--timeout", "soon").returncode == 2


def _read_until(process: subprocess.Popen[str], wanted: str, timeout: float) -> str:
    """What the process wrote to stdout until a line holding `wanted`, within `timeout` seconds."""
    assert process.stdout is not None
    seen, deadline = "", time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while wanted not in seen:
            left = deadline - time.monotonic()
            assert left > 0 and process.poll() is None, f"no {wanted!r} in {seen!r}"
            if selector.select(left):
                seen += process.stdout.readline()
    return seen


def test_watch_follows_the_job_to_its_end(kube: Cluster) -> None:
    kube.submit(document("watched"))
    kube.set_status("watched", running(10))
    watching = subprocess.Popen(
        [sys.executable, "-m", "tjctl", "--kubeconfig", str(kube.plane.kubeconfig), "-n", kube.namespace,
         "watch", "watched"],
        cwd=REPO, env=tjctl_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _read_until(watching, "attempt 1: Running", TIMEOUT)
        result = {"metrics": {"accuracy": 0.97}, "step": 100, "durationSeconds": 5}
        kube.set_status("watched", {"phase": "Succeeded", "progress": {"step": 100}, "result": result})
        out, err = watching.communicate(timeout=TIMEOUT)
    finally:
        watching.kill()
    assert watching.returncode == 0, err
    assert "attempt 1: Succeeded" in out and "result: accuracy 0.9700" in out, out


def test_logs_of_a_gone_attempt_are_the_lines_the_operator_kept(kube: Cluster) -> None:
    kube.submit(document("crashed"), document("young"))
    tail = "loading\nstep 120\nCUDA out of memory\n"
    kube.set_status("crashed", running(30, attempt=2, lastFailure=failure(1, "crashed-worker-1-1", tail)))
    kube.set_status("young", running())
    kept = kube.run("logs", "crashed", "--previous-attempt")
    assert kept.returncode == 0 and kept.stdout == tail, kept.stderr
    assert "is gone" in kept.stderr and "crashed-worker-1-1" in kept.stderr
    assert kube.run("logs", "crashed", "--attempt", "1", "--tail", "1", "--replica", "worker-1").stdout == (
        "CUDA out of memory\n"
    )
    one_error_line(kube.run("logs", "crashed", "--previous-attempt", "--replica", "worker-0"), 1, "leave out --replica")
    one_error_line(kube.run("logs", "crashed", "--attempt", "2"), 1, "its last failure is of attempt 1")
    one_error_line(kube.run("logs", "crashed"), 1, "(NotFound)", "worker-0")
    one_error_line(kube.run("logs", "young", "--previous-attempt"), 2, "in attempt 1: none came before")
    one_error_line(kube.run("logs", "crashed", "--replica", "chief-0"), 2, "--replica chief-0: ")


def test_a_kubeconfig_named_wins_over_the_rest_api_of_the_environment(kube: Cluster) -> None:
    kube.submit(document("mine"))
    closed = {"TJCTL_SERVER": f"http://127.0.0.1:{free_port()}", "TJCTL_TOKEN": "t"}
    listed = kube.run("list", "-o", "name", env=closed)
    assert listed.stdout == "trainingjob.trainingjob.io/mine\n" and listed.returncode == 0, listed.stderr
    one_error_line(tjctl("list", env=closed), 4, "unreachable")  # none named: the environment's REST API
    both = kube.run("list", "--server", closed["TJCTL_SERVER"], env=closed)
    one_error_line(both, 2, "--server names the REST API, --kubeconfig and --context")


def test_errors_are_one_line_with_their_exit_code(kube: Cluster, tmp_path: Path) -> None:
    kube.submit(document("exists"))
    nowhere = {"KUBECONFIG": str(tmp_path / "missing"), "HOME": str(tmp_path)}
    one_error_line(tjctl("list", env=nowhere), 4, "error: no cluster to talk to", "--kubeconfig")
    closed = f"http://127.0.0.1:{free_port()}"
    one_error_line(tjctl("--server", closed, "--token", "t", "get", "x"), 4, "unreachable", "Connection refused")
    down = yaml.safe_load(kube.plane.kubeconfig.read_text())
    down["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{free_port()}"
    (tmp_path / "down").write_text(yaml.safe_dump(down))
    one_error_line(tjctl("--kubeconfig", str(tmp_path / "down"), "list"), 4, "unreachable")
    one_error_line(kube.run("get", "missing"), 1, "error from the server (NotFound)", '"missing"')
    one_error_line(kube.run("submit", "-", stdin=yaml.safe_dump(document("exists"))), 1, "(AlreadyExists)")
    nobody = kube.plane.user_kubeconfig(f"nobody-{uuid.uuid4().hex[:6]}")
    one_error_line(tjctl("--kubeconfig", str(nobody), "-n", kube.namespace, "list"), 1, "(Forbidden)")
    forged = token_kubeconfig(tmp_path / "forged", kube.plane, "not-a-token")
    one_error_line(tjctl("--kubeconfig", str(forged), "get", "exists"), 1, "(Unauthorized)")
    bad = document("bad")
    bad["spec"]["workers"]["replicas"] = -2
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad))
    invalid = kube.run("submit", str(tmp_path / "bad.yaml"))
    assert invalid.returncode == 2 and "spec.workers.replicas" in invalid.stderr, invalid.stderr
    assert "Traceback" not in invalid.stderr
    one_error_line(kube.run("submit", str(tmp_path / "absent.yaml")), 2, "absent.yaml: no such file")
    (tmp_path / "broken.yaml").write_text("spec: [unclosed\n")
    one_error_line(kube.run("submit", str(tmp_path / "broken.yaml")), 2, "cannot read it as YAML")
    one_error_line(kube.run("delete", "exists", "--context", "elsewhere"), 4, "no context 'elsewhere'")
    assert kube.run("delete", "exists").stdout.strip() == "trainingjob.trainingjob.io/exists deleted"


def test_a_sweep_is_submitted_listed_shown_with_its_trials_ranked_and_deleted(kube: Cluster) -> None:
    with kube.plane.api_client() as api:
        install_crd(api, crd.SWEEP)
    submitted = kube.run("sweep", "submit", str(REPO / "examples" / "digits-sweep.yaml"))
    assert submitted.stdout == "trainingsweep.trainingjob.io/digits-sweep created\n", submitted.stderr
    trials = [
        {"number": 0, "jobName": "digits-sweep-0", "parameters": {"lr": 0.001, "batch": 64, "optimizer": "adam"},
         "phase": "Succeeded", "objective": 0.95, "objectiveStep": 1000},
        {"number": 1, "jobName": "digits-sweep-1", "parameters": {"lr": 0.1, "batch": 16, "optimizer": "sgd"},
         "phase": "Pruned", "objective": 0.4, "objectiveStep": 200, "reason": "PrunedByMedian"},
        {"number": 2, "jobName": "digits-sweep-2", "parameters": {"lr": 0.01, "batch": 128, "optimizer": "adamw"},
         "phase": "Succeeded", "objective": 0.98, "objectiveStep": 1000},
    ]  # fmt: skip
    best = {key: trials[2][key] for key in ("number", "jobName", "parameters", "objective")}
    status = {"phase": "Running", "trials": trials, "bestTrial": best,
              "counts": {"running": 0, "succeeded": 2, "pruned": 1, "failed": 0, "pending": 0}}  # fmt: skip
    kube.custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, kube.namespace, SWEEP_PLURAL, "digits-sweep", {"status": status}
    )
    listed = kube.run("sweep", "list").stdout.splitlines()
    assert listed[0].split() == ["NAME", "PHASE", "TRIALS", "RUNNING", "SUCCEEDED", "PRUNED", "FAILED", "BEST"]
    assert listed[1].split() == [
        "digits-sweep",
        "Running",
        "3/12",
        "0",
        "2",
        "1",
        "0",
        "accuracy",
        "0.9800",
        "(trial",
        "2)",
    ]
    shown = kube.run("sweep", "get", "digits-sweep").stdout
    ranked = [line.split()[0] for line in shown.split("ACCURACY")[1].splitlines()[1:4]]
    assert ranked == ["2", "0", "1"], shown  # best first, the pruned one last
    assert "best: trial 2 (digits-sweep-2), accuracy 0.9800 with lr=0.01, batch=128, optimizer=adamw" in shown
    as_json = json.loads(kube.run("sweep", "get", "digits-sweep", "-o", "json").stdout)
    assert as_json["status"]["bestTrial"] == best and as_json["kind"] == "TrainingSweep"
    deleted = kube.run("sweep", "delete", "digits-sweep")
    assert deleted.stdout == "trainingsweep.trainingjob.io/digits-sweep deleted\n"
    missing = kube.run("sweep", "get", "digits-sweep")
    assert (
        missing.returncode == 1 and 'trainingsweep "digits-sweep"' in missing.stderr and "not found" in missing.stderr
    )
