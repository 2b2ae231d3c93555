"""The SDK's client: TrainingJobs as typed models, through the Kubernetes API or the project's REST API."""

import os
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError

from trainingjob.model import ConditionStatus, ConditionType, LastFailure, Phase, TrainingJob
from trainingjob_sdk.documents import kinds_in
from trainingjob_sdk.errors import (
    FieldError,
    Invalid,
    JobFailed,
    JobFinished,
    NotConfigured,
    TrainingJobError,
    Unavailable,
    WaitTimeout,
)
from trainingjob_sdk.jobs import JobEvent, Manifest, Manifests
from trainingjob_sdk.kube import KubeJobs
from trainingjob_sdk.manifests import Source, Sources, as_job, create_body, documents, to_create
from trainingjob_sdk.rest import RestJobs
from trainingjob_sdk.sweeps import Sweeps, sweeps_of

Jobs = list[TrainingJob]
Events = list[JobEvent]
Until = Phase | ConditionType | str | Iterable[Phase | ConditionType | str] | Callable[[TrainingJob], bool] | None
TARGETS = tuple(dict.fromkeys(each.value for each in (*Phase, *ConditionType)))  # what `until` may name


class Transport(Protocol):
    """What KubeJobs and RestJobs both do, on JSON manifests."""

    namespace: str

    def create(self, body: Manifest, namespace: str | None = None) -> Manifest: ...
    def get(self, name: str, namespace: str | None = None) -> Manifest: ...
    def list(
        self, namespace: str | None = None, selector: str | None = None, *, all_namespaces: bool = False
    ) -> Manifests: ...
    def delete(self, name: str, namespace: str | None = None) -> None: ...
    def set_suspend(self, name: str, suspend: bool, namespace: str | None = None) -> Manifest: ...
    def watch(self, name: str, namespace: str | None = None, timeout: float | None = None) -> Iterator[Manifest]: ...
    def events(self, name: str, namespace: str | None = None) -> Manifests: ...
    def failure(self, name: str, namespace: str | None = None) -> Manifest | None: ...
    def logs(
        self, name: str, namespace: str | None = None, *, replica: str = "worker-0", follow: bool = False,
        tail: int | None = None, attempt: int | None = None,
    ) -> Iterator[str]: ...  # fmt: skip
    def timeline(self, name: str, namespace: str | None = None, *, chrome: bool = False) -> Manifest: ...
    def close(self) -> None: ...


def targets(until: str | Iterable[Phase | ConditionType | str]) -> frozenset[str]:
    """The phases and condition types `until` names; Invalid naming `until` for any other name (or none)."""
    if not isinstance(until, str | Iterable):
        message = f"until: {until!r} is none of {', '.join(TARGETS)}, nor several of them, nor a predicate"
        raise Invalid(message, [FieldError("until", message)], status=None)
    wanted = frozenset(str(each) for each in ([until] if isinstance(until, str) else until))
    unknown = sorted(wanted.difference(TARGETS))
    if unknown or not wanted:
        named = ", ".join(map(repr, unknown)) if unknown else "nothing"
        message = f"until: {named} is none of {', '.join(TARGETS)} (a phase, or a condition type that is True)"
        raise Invalid(message, [FieldError("until", message)], status=None)
    return wanted


def reached(until: Until) -> Callable[[TrainingJob], bool]:
    """Whether a job is where `until` says: a phase, or a condition type that is True, or any of several, or a
    predicate; None means finished (Succeeded or Failed). Invalid for a name that is neither."""
    if until is None:
        return lambda job: job.status is not None and job.status.phase.is_terminal
    if callable(until):
        return until
    wanted = targets(until)

    def check(job: TrainingJob) -> bool:
        status = job.status
        if status is None:
            return False
        true = {c.type.value for c in status.conditions if c.status == ConditionStatus.TRUE}
        return status.phase.value in wanted or bool(true & wanted)

    return check


def described(until: Until) -> str:
    """`until` in a message: 'Running', 'Succeeded or Suspended', 'the end (Succeeded or Failed)'."""
    if until is None:
        return "the end (Succeeded or Failed)"
    if callable(until):
        return "the condition waited for"
    return " or ".join(sorted(targets(until)))


def _phase(job: TrainingJob | None) -> str:
    return job.status.phase.value if job is not None and job.status is not None else "unknown"


def lines(chunks: Iterable[str]) -> Generator[str, None, None]:
    """Text as it comes, in whole lines (each with its newline; the last one as it ends)."""
    pending = ""
    for text in chunks:
        *whole, pending = (pending + text).split("\n")
        yield from (line + "\n" for line in whole)
    if pending:
        yield pending


class Client:
    """TrainingJobs of one cluster, in `namespace` unless a call names another."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    @classmethod
    def kube(
        cls, kubeconfig: str | Path | None = None, *, context: str | None = None, namespace: str | None = None
    ) -> "Client":
        """Through the Kubernetes API: the kubeconfig named, $KUBECONFIG, ~/.kube/config, or the pod's account."""
        return cls(KubeJobs.connect(kubeconfig, context=context, namespace=namespace))

    @classmethod
    def rest(
        cls, server: str, token: str, *, namespace: str | None = None, cacert: str | Path | None = None
    ) -> "Client":
        """Through the REST API at `server` with a Kubernetes bearer token (kubectl create token ...)."""
        return cls(RestJobs(server, token, namespace, cacert=cacert))

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self.transport.close()

    @property
    def namespace(self) -> str:
        return self.transport.namespace

    @property
    def sweeps(self) -> Sweeps:
        """The cluster's TrainingSweeps: create, get, list, delete, best."""
        return sweeps_of(self.transport)

    def create(self, source: Source, namespace: str | None = None) -> TrainingJob:
        """Create one job from a TrainingJob, a dict, YAML/JSON text or a file; generateName is honoured."""
        found = documents(source)
        if len(found) != 1:
            message = f"expected one TrainingJob, found {len(found)} documents ({kinds_in(found)}): use create_all"
            raise Invalid(message, status=None)
        return self.create_all(found, namespace)[0]

    def check_all(self, source: Sources, namespace: str | None = None, *, where: str | None = None) -> Manifests:
        """What create_all would send, nothing sent: every document of `source` checked for creation (the model, a
        name or generateName, its namespace against `namespace`), as request bodies. Invalid naming the document
        (after `where`, the source's name, when given) otherwise."""
        found = documents(source)
        bodies = []
        for number, manifest in enumerate(found, 1):
            named = where
            if len(found) > 1:
                named = f"{where} (document {number})" if where else f"document {number}"
            job = to_create(manifest, named)
            ns = namespace or job.metadata.namespace or self.namespace
            bodies.append(create_body(job, ns, named or "the TrainingJob"))
        return bodies

    def create_all(self, source: Sources, namespace: str | None = None) -> Jobs:
        """Create every job of a multi-document file or text (or a list of jobs and dicts), each checked before any
        is created. When the server refuses one, its error lists those created before it (`error.created`)."""
        created: Jobs = []
        for body in self.check_all(source, namespace):
            try:
                created.append(as_job(self.transport.create(body, body["metadata"]["namespace"])))
            except TrainingJobError as error:
                error.created = created
                raise
        return created

    def get(self, name: str, namespace: str | None = None) -> TrainingJob:
        return as_job(self.transport.get(name, namespace))

    def list(self, namespace: str | None = None, *, selector: str | None = None, all_namespaces: bool = False) -> Jobs:
        """The jobs of the namespace (or of every namespace), optionally only those whose labels match
        `selector` (as kubectl -l: "team=vision,tier in (a,b)")."""
        return [as_job(raw) for raw in self.transport.list(namespace, selector, all_namespaces=all_namespaces)]

    def delete(self, name: str, namespace: str | None = None) -> None:
        """Delete the job; its pods go after it."""
        self.transport.delete(name, namespace)

    def suspend(self, name: str, namespace: str | None = None) -> TrainingJob:
        """Suspend the job: its pods checkpoint and stop; it keeps its place and its checkpoints."""
        return as_job(self.transport.set_suspend(name, True, namespace))

    def resume(self, name: str, namespace: str | None = None) -> TrainingJob:
        """Resume a suspended job from its newest checkpoint."""
        return as_job(self.transport.set_suspend(name, False, namespace))

    def watch(self, name: str, namespace: str | None = None, *, timeout: float | None = None) -> Iterator[TrainingJob]:
        """The job now and after every change of its status, until it is finished or `timeout` seconds pass."""
        last: Any = ()
        for raw in self.transport.watch(name, namespace, timeout):
            job = as_job(raw)
            if job.status != last:
                last = job.status
                yield job
            if job.status is not None and job.status.phase.is_terminal:
                return

    def wait(
        self, name: str, until: Until = None, *, namespace: str | None = None, timeout: float | None = None,
        fail_on_failed: bool = True, what: str | None = None,
    ) -> TrainingJob:  # fmt: skip
        """Wait until the job reaches `until` (see `reached`; default: finished) and return it; `what` names what a
        predicate waits for, in messages. JobFailed if it fails first (or, with the default `until`, fails at all)
        unless `fail_on_failed` is False; JobFinished if it finishes otherwise without reaching `until`;
        WaitTimeout once `timeout` seconds have passed; Invalid for an `until` that names no phase or condition."""
        until = until if until is None or callable(until) else targets(until)
        check, wanted = reached(until), what or described(until)
        started, job = time.monotonic(), None
        for job in self.watch(name, namespace, timeout=timeout):
            failed = job.status is not None and job.status.phase == Phase.FAILED
            if failed and fail_on_failed and (until is None or not check(job)):
                raise JobFailed(job)
            if check(job):
                return job
            if job.status is not None and job.status.phase.is_terminal:
                message = f"trainingjob {name!r} finished ({_phase(job)}) without reaching {wanted}"
                raise JobFinished(message, job)
        waited = time.monotonic() - started
        if timeout is not None and waited >= timeout:
            message = f"trainingjob {name!r} did not reach {wanted} in {waited:.0f} s (phase {_phase(job)})"
            raise WaitTimeout(message, job)
        raise Unavailable(f"the watch of trainingjob {name!r} ended before it reached {wanted} (phase {_phase(job)})")

    def logs(
        self, name: str, namespace: str | None = None, *, replica: str = "worker-0", follow: bool = False,
        tail: int | None = None, attempt: int | None = None,
    ) -> Generator[str, None, None]:  # fmt: skip
        """One replica's log line by line (with their newlines): of the current attempt, or of `attempt` while
        its pod is still there; with `follow`, until the container ends."""
        return lines(self.transport.logs(name, namespace, replica=replica, follow=follow, tail=tail, attempt=attempt))

    def last_failure(self, name: str, namespace: str | None = None) -> LastFailure | None:
        """The job's last failure with the failed rank's last log lines (logTail), kept in its status when the pod
        may be gone; None when it has not failed. Through the REST API, the caller needs the right to read logs."""
        failure = getattr(self.transport, "failure", None)  # a transport written before failure() was
        if failure is not None:
            raw = failure(name, namespace)
        else:
            status = self.transport.get(name, namespace).get("status")
            raw = status.get("lastFailure") if isinstance(status, dict) else None
        try:
            return LastFailure.model_validate(raw) if raw else None
        except ValidationError:  # stored before the model changed: as good as none
            return None

    def events(self, name: str, namespace: str | None = None) -> Events:
        """The Kubernetes events about the job, oldest first."""
        return [JobEvent.model_validate(raw) for raw in self.transport.events(name, namespace)]

    def timeline(self, name: str, namespace: str | None = None, *, chrome: bool = False) -> Manifest:
        """Where the job's time went (attempts, pods, failures, checkpoints), or a Chrome trace of it."""
        return self.transport.timeline(name, namespace, chrome=chrome)


def connect(
    *, server: str | None = None, token: str | None = None, kubeconfig: str | Path | None = None,
    namespace: str | None = None, context: str | None = None, cacert: str | Path | None = None,
) -> Client:  # fmt: skip
    """A client for the REST API at `server` with `token` ($TJCTL_TOKEN); otherwise for the Kubernetes API of the
    kubeconfig (or of the pod it runs in). $TJCTL_SERVER stands for `server` unless a kubeconfig or context is
    named: what the caller names wins over the environment. Both `server` and a kubeconfig (or context): Invalid."""
    if server and (kubeconfig or context):
        message = "server names the REST API, kubeconfig or context a cluster's Kubernetes API: give one of them"
        raise Invalid(message, [FieldError("server", message)], status=None)
    if not (server or kubeconfig or context):
        server = os.environ.get("TJCTL_SERVER")
    if server:
        token = token or os.environ.get("TJCTL_TOKEN")
        if not token:
            raise NotConfigured(f"the REST API at {server} needs a token (token= or $TJCTL_TOKEN)")
        return Client.rest(server, token, namespace=namespace, cacert=cacert or os.environ.get("TJCTL_CACERT"))
    return Client.kube(kubeconfig, context=context, namespace=namespace)
