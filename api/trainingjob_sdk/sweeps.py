"""TrainingSweeps through either transport (the Kubernetes API, or the REST API): create, read, list and delete
them, and ask for the best trial so far. `Client.sweeps` is the way in."""

from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError

from trainingjob.model import GROUP, VERSION
from trainingjob.model.sweep import SWEEP_KIND, SWEEP_PLURAL, TrainingSweep
from trainingjob.model.sweep_status import BestTrial
from trainingjob_sdk.documents import kinds_in
from trainingjob_sdk.errors import Invalid
from trainingjob_sdk.jobs import Manifest, Manifests
from trainingjob_sdk.kube import KubeJobs
from trainingjob_sdk.kube_answers import answering
from trainingjob_sdk.manifests import Source, check_kind, create_body, documents, invalid
from trainingjob_sdk.rest import RestJobs


def describe_sweep(namespace: str, name: str) -> str:
    """How errors name a sweep."""
    return f'trainingsweep "{name}" in namespace "{namespace}"'


class SweepTransport(Protocol):
    def create(self, body: Manifest, namespace: str) -> Manifest: ...
    def get(self, name: str, namespace: str) -> Manifest: ...
    def list(self, namespace: str) -> Manifests: ...
    def delete(self, name: str, namespace: str) -> None: ...


class KubeSweeps:
    """Sweeps through the Kubernetes API, with the credentials (and request timeout) of a KubeJobs."""

    def __init__(self, jobs: KubeJobs) -> None:
        self.custom, self.timeout = jobs.custom, jobs.timeout

    def create(self, body: Manifest, namespace: str) -> Manifest:
        with answering(describe_sweep(namespace, str(body["metadata"].get("name", "")))):
            created: Manifest = self.custom.create_namespaced_custom_object(
                GROUP, VERSION, namespace, SWEEP_PLURAL, body, field_validation="Strict", _request_timeout=self.timeout
            )
        return created

    def get(self, name: str, namespace: str) -> Manifest:
        with answering(describe_sweep(namespace, name)):
            found: Manifest = self.custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, SWEEP_PLURAL, name, _request_timeout=self.timeout
            )
        return found

    def list(self, namespace: str) -> Manifests:
        """The namespace's sweeps by name (a namespace holds few: one page)."""
        with answering(f'trainingsweeps in namespace "{namespace}"'):
            page = self.custom.list_namespaced_custom_object(
                GROUP, VERSION, namespace, SWEEP_PLURAL, _request_timeout=self.timeout
            )
        items: Manifests = page.get("items") or []
        return sorted(items, key=lambda s: str(s["metadata"]["name"]))

    def delete(self, name: str, namespace: str) -> None:
        with answering(describe_sweep(namespace, name)):
            self.custom.delete_namespaced_custom_object(
                GROUP, VERSION, namespace, SWEEP_PLURAL, name, propagation_policy="Background",
                _request_timeout=self.timeout,
            )  # fmt: skip


class RestSweeps:
    """Sweeps through the REST API, with the connection (and checks of its answers) of a RestJobs."""

    def __init__(self, jobs: RestJobs) -> None:
        self.rest = jobs

    @staticmethod
    def path(namespace: str, name: str = "") -> str:
        return f"/namespaces/{namespace}/{SWEEP_PLURAL}" + (f"/{name}" if name else "")

    def create(self, body: Manifest, namespace: str) -> Manifest:
        return self.rest._object(self.rest._call("POST", self.path(namespace), json=body), "a sweep")

    def get(self, name: str, namespace: str) -> Manifest:
        return self.rest._object(self.rest._call("GET", self.path(namespace, name)), "a sweep")

    def list(self, namespace: str) -> Manifests:
        return self.rest._items(self.rest._call("GET", self.path(namespace)), "sweeps")

    def delete(self, name: str, namespace: str) -> None:
        self.rest._call("DELETE", self.path(namespace, name))


class Sweeps:
    """The TrainingSweeps of a cluster, in `namespace` unless a call names another."""

    def __init__(self, transport: SweepTransport, namespace: str) -> None:
        self.transport, self.namespace = transport, namespace

    def create(self, source: Source | TrainingSweep, namespace: str | None = None) -> TrainingSweep:
        """Create one sweep from a TrainingSweep, a dict, YAML/JSON text or a file; checked by the model first
        (Invalid naming each field), so a sweep the operator would refuse is never sent."""
        found = [source.to_manifest()] if isinstance(source, TrainingSweep) else documents(source)
        where = f"{source}: " if isinstance(source, Path) else ""
        if len(found) != 1:
            message = f"{where}expected one TrainingSweep, found {len(found)} documents ({kinds_in(found)})"
            raise Invalid(
                f"{message}: apply other kinds with kubectl apply -f, and create the sweep alone", status=None
            )
        sweep = to_create(found[0], str(source) if where else None)
        ns = namespace or sweep.metadata.namespace or self.namespace
        return as_sweep(self.transport.create(create_body(sweep, ns), ns))

    def get(self, name: str, namespace: str | None = None) -> TrainingSweep:
        return as_sweep(self.transport.get(name, namespace or self.namespace))

    def list(self, namespace: str | None = None) -> list[TrainingSweep]:
        return [as_sweep(raw) for raw in self.transport.list(namespace or self.namespace)]

    def delete(self, name: str, namespace: str | None = None) -> None:
        """Delete the sweep; its trials' jobs (and their pods) go after it."""
        self.transport.delete(name, namespace or self.namespace)

    def best(self, name: str, namespace: str | None = None) -> BestTrial | None:
        """The best trial so far (its number, job, parameters and objective); None before any has succeeded."""
        status = self.get(name, namespace).status
        return status.best_trial if status is not None else None


def to_create(manifest: dict[str, Any], where: str | None = None) -> TrainingSweep:
    """A manifest checked for creation: a TrainingSweep (the manifest named by `where` when it is not), valid for the
    model and named."""
    check_kind(manifest, SWEEP_KIND, where)
    try:
        sweep = TrainingSweep.from_manifest(manifest)
    except ValidationError as error:
        raise invalid(error, "the TrainingSweep") from None
    if not sweep.metadata.name:
        raise Invalid("the TrainingSweep: metadata.name is required", status=None)
    return sweep


def as_sweep(raw: Manifest) -> TrainingSweep:
    """A sweep as a server returned it; Invalid, naming the fields, for one the model refuses."""
    try:
        return TrainingSweep.from_manifest(raw)
    except ValidationError as error:
        raise invalid(error, "the stored TrainingSweep") from None


def sweeps_of(transport: Any) -> Sweeps:
    """The sweeps of a Client's transport."""
    if isinstance(transport, KubeJobs):
        return Sweeps(KubeSweeps(transport), transport.namespace)
    if isinstance(transport, RestJobs):
        return Sweeps(RestSweeps(transport), transport.namespace)
    raise TypeError(f"sweeps need a KubeJobs or RestJobs transport, not {type(transport).__name__}")
