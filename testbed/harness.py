"""A test's view of one namespace on a real control plane: create TrainingJobs, read them and their pods, end
pods as a kubelet would, and wait (polling with a deadline) for what the operator does."""

import contextlib
import http.server
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from kubernetes import client

from testbed import pods
from testbed.processes import poll_until
from trainingjob.children.naming import job_selector
from trainingjob.children.specs import PROGRESS_PORT
from trainingjob.model import GROUP, PLURAL, VERSION

Manifest = dict[str, Any]


class OperatorLog(Protocol):
    """Where the operator's log is: its process here, or its pod on a real node."""

    def log_tail(self) -> str: ...


class Harness:
    """A test's view of one namespace: create jobs, read them and their pods, end pods."""

    def __init__(self, api: client.ApiClient, namespace: str, operator: OperatorLog) -> None:
        self.core, self.custom, self.ns, self.operator = (
            client.CoreV1Api(api),
            client.CustomObjectsApi(api),
            namespace,
            operator,
        )

    def create(self, manifest: Manifest) -> None:
        self.custom.create_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, manifest)

    def job(self, name: str) -> Manifest:
        found: Manifest = self.custom.get_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, name)
        return found

    def patch_spec(self, name: str, spec: Manifest) -> None:
        self.custom.patch_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, name, {"spec": spec})

    def pods(self, name: str) -> list[Any]:
        items = self.core.list_namespaced_pod(self.ns, label_selector=job_selector(name)).items
        return sorted((p for p in items if p.metadata.deletion_timestamp is None), key=lambda p: p.metadata.name)

    def wait(self, name: str, check: Callable[[Manifest], bool], what: str, timeout: float = 60) -> Manifest:
        def ready() -> Manifest | None:
            job = self.job(name)
            return job if check(job) else None

        try:
            return poll_until(ready, timeout=timeout, interval=0.2, what=f"{name}: {what}")
        except TimeoutError as error:
            raise AssertionError(
                f"{error}\njob status: {self.job(name).get('status')}\n{self.operator.log_tail()}"
            ) from error

    def wait_phase(self, name: str, phase: str, timeout: float = 60, **status: Any) -> Manifest:
        def check(job: Manifest) -> bool:
            current = job.get("status") or {}
            return current.get("phase") == phase and all(current.get(k) == v for k, v in status.items())

        return self.wait(name, check, f"phase {phase} {status or ''}", timeout)

    def wait_running_pods(self, name: str, count: int, attempt: int, timeout: float = 60) -> list[Any]:
        def running() -> list[Any] | None:
            uid = self.job(name)["metadata"]["uid"]  # a namesake's pods the GC has yet to delete are not this job's
            found = [
                p
                for p in self.pods(name)
                if p.metadata.labels["trainingjob.io/attempt"] == str(attempt)
                and any(o.uid == uid for o in p.metadata.owner_references or ())
            ]
            return found if len(found) == count and all(p.status.phase == "Running" for p in found) else None

        try:
            return poll_until(running, timeout=timeout, interval=0.2, what=f"{count} running pods of attempt {attempt}")
        except TimeoutError as error:
            listed = self.core.list_namespaced_pod(self.ns, label_selector=job_selector(name)).items
            pods = [(p.metadata.name, p.status.phase, p.metadata.deletion_timestamp) for p in listed]
            raise AssertionError(
                f"{error}\npods: {pods}\njob status: {self.job(name).get('status')}\n{self.operator.log_tail()}"
            ) from error

    def wait_event(self, name: str, reason: str, timeout: float = 30) -> list[str]:
        """The reasons of the events about job `name`, once one has `reason` (the operator may record an event
        after the status write a test waited for)."""

        def recorded() -> list[str] | None:
            events = self.core.list_namespaced_event(self.ns, field_selector=f"involvedObject.name={name}").items
            reasons = [e.reason for e in events]
            return reasons if reason in reasons else None

        return poll_until(recorded, timeout=timeout, interval=0.2, what=f"{name}: a {reason} event")

    def wait_gone(self, name: str, what: str = "the job deleted after its TTL", timeout: float = 60) -> None:
        def gone() -> bool:
            try:
                self.job(name)
            except client.ApiException as error:
                return bool(error.status == 404)
            return False

        poll_until(gone, timeout=timeout, what=what)

    def finish(self, pod: str, exit_code: int, **kwargs: str) -> None:
        pods.finish_pod(self.core, self.ns, pod, exit_code, **kwargs)


def condition(job: Manifest, kind: str) -> Manifest:
    return next(c for c in job["status"]["conditions"] if c["type"] == kind)


@contextlib.contextmanager
def progress_endpoint(address: str, report: object) -> Iterator[None]:
    """Rank 0's progress endpoint, as the trainer serves it, on the pod's (loopback) IP."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps(report).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = http.server.ThreadingHTTPServer((address, PROGRESS_PORT), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
