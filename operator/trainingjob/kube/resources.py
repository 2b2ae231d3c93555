"""What the job and sweep adapters share: our own resources (TrainingJobs, TrainingSweeps) read, status-patched,
created and deleted by plural, and every write paced by the runtime's shared limit. 404 on a read or a delete
and 409 on a create mean "already done"; a status write on a changed or deleted object raises Conflict or Gone."""

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from kubernetes import client

from trainingjob.kube.answers import answer, status_of
from trainingjob.kube.ports import Conflict, Gone, Manifest
from trainingjob.kube.writes import Pacer, Throttled
from trainingjob.model import GROUP, VERSION

log = logging.getLogger(__name__)
T = TypeVar("T")
TIMEOUT = (5, 30)  # connect, read: a hung apiserver connection must not hold a reconcile for ever


def _ignored(status: int, error: Exception) -> None:
    """Take an answer of `status` as done; raise any other error as it came."""
    if status_of(error) != status:
        raise error


def _ignore_written(_: Manifest) -> None:
    pass


class Resources:
    """Our group's objects on the apiserver through `api`; what the apiserver answers to a status write goes to
    `on_written`; writes go through `pacer`."""

    def __init__(self, api: Any, *, pacer: Pacer, on_written: Callable[[Manifest], None] = _ignore_written) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.pacer, self.on_written = pacer, on_written

    def paced(self, write: Callable[[], T]) -> T:
        """One write within the shared limit: a 429 is waited out (as its Retry-After asks) and the write sent again,
        until the pacer's deadline; then the 429 is raised as it came."""

        def attempt() -> T:
            try:
                return write()
            except client.ApiException as error:
                found = answer(error)
                if found is not None and found.status == 429:
                    raise Throttled(found.retry_after, error) from error
                raise

        try:
            return self.pacer.call(attempt)
        except Throttled as throttled:
            raise throttled.answer or throttled from None

    def read(self, plural: str, namespace: str, name: str) -> Manifest | None:
        """One object, or None when it is gone."""
        try:
            found: Manifest = self.custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, plural, name, _request_timeout=TIMEOUT
            )
        except client.ApiException as error:
            _ignored(404, error)
            return None
        return found

    def list(self, plural: str, namespace: str, label_selector: str) -> list[Manifest]:
        found = self.custom.list_namespaced_custom_object(
            GROUP, VERSION, namespace, plural, label_selector=label_selector, _request_timeout=TIMEOUT
        )
        items: list[Manifest] = found["items"]
        return items

    def write_status(self, plural: str, namespace: str, name: str, resource_version: str, patch: Manifest) -> str:
        """A merge patch of the status subresource, guarded by the version it was planned from; the new version.
        Paced like every other write: a 429 is waited out, not a failed reconcile."""
        body = {"metadata": {"resourceVersion": resource_version}, "status": patch}
        try:
            written = self.paced(
                lambda: self.custom.patch_namespaced_custom_object_status(
                    GROUP, VERSION, namespace, plural, name, body, _request_timeout=TIMEOUT
                )
            )
        except client.ApiException as error:
            status = status_of(error)
            if status == 404:
                raise Gone(f"{namespace}/{name}") from error
            if status == 409:
                raise Conflict(f"{namespace}/{name}") from error
            raise
        self.on_written(written)
        return str(written["metadata"]["resourceVersion"])

    def create(self, plural: str, namespace: str, manifest: Manifest) -> None:
        """Create one, paced; one of that name already there is taken as created."""
        try:
            self.paced(
                lambda: self.custom.create_namespaced_custom_object(
                    GROUP, VERSION, namespace, plural, manifest, _request_timeout=TIMEOUT
                )
            )
        except client.ApiException as error:
            _ignored(409, error)

    def merge_patch(self, plural: str, namespace: str, name: str, patch: Manifest) -> None:
        """A merge patch of the object (not its status); a missing object is taken as done."""
        try:
            self.custom.patch_namespaced_custom_object(
                GROUP, VERSION, namespace, plural, name, patch,
                _content_type="application/merge-patch+json", _request_timeout=TIMEOUT,
            )  # fmt: skip
        except client.ApiException as error:
            _ignored(404, error)

    def delete(self, plural: str, namespace: str, name: str) -> None:
        """Delete one and let the garbage collector take its children in the background; a missing one is done."""
        try:
            self.custom.delete_namespaced_custom_object(
                GROUP, VERSION, namespace, plural, name, propagation_policy="Background", _request_timeout=TIMEOUT
            )
        except client.ApiException as error:
            _ignored(404, error)
