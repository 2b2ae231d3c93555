"""What the job and sweep adapters share: our own resources (TrainingJobs, TrainingSweeps) read, status-patched,
created and deleted by plural, and every write paced by the runtime's shared limit. 404 on a read or a delete
and 409 on a create mean "already done"; a status write on a changed or deleted object raises Conflict or Gone.

Every delete names the object it was decided on (its UID, and its resourceVersion when the decision rests on
that version): a namesake created since, or a changed object, answers 409 and is left alone; the next pass
decides again from what it then sees."""

import logging
from collections.abc import Callable
from typing import Any, TypeVar

import orjson
from kubernetes import client

from trainingjob.kube.answers import answer, status_of
from trainingjob.kube.direct import MERGE_PATCH, REQUEST_TIMEOUT, Direct, custom_path
from trainingjob.kube.ports import Conflict, Gone, Manifest
from trainingjob.kube.writes import Pacer, Throttled
from trainingjob.model import GROUP, VERSION

log = logging.getLogger(__name__)
T = TypeVar("T")
TIMEOUT = REQUEST_TIMEOUT  # the generated client's calls wait as long as the direct ones


def ignored(status: int, error: Exception) -> None:
    """Take an answer of `status` as done; raise any other error as it came."""
    if status_of(error) != status:
        raise error


def _ignore_written(_: Manifest) -> None:
    pass


def delete_options(uid: str, *, resource_version: str | None = None, **options: Any) -> Manifest:
    """A delete (DeleteOptions, `options` by their JSON names) of the object with this UID (and this version, when
    given) only."""
    guard = {"uid": uid} if resource_version is None else {"uid": uid, "resourceVersion": resource_version}
    return {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": guard, **options}


def deleted(error: client.ApiException, what: str) -> None:
    """After a guarded delete failed: gone already (404) is done, a failed precondition (409: not the object the
    delete was decided on) is left to the next pass; anything else is raised as it came."""
    status = status_of(error)
    if status == 409:
        log.debug("not deleting %s: it is not the object the delete was decided on (%s)", what, error.reason)
    elif status != 404:
        raise error


def not_patched(error: client.ApiException, what: str) -> None:
    """After a pod patch guarded by its UID (a release of the tracking finalizer, an earlier operator's gate lifted)
    failed: gone already (404) needs nothing more; another pod of that name since (the apiserver refuses to change a
    pod's UID to the one the patch names: 422) or a conflict (409) is left to the next pass; anything else is
    raised as it came."""
    status = status_of(error)
    if status in (409, 422):
        log.debug("not patching %s: it is not the pod the decision was made on (%s)", what, error.reason)
    elif status != 404:
        raise error


class Resources:
    """Our group's objects on the apiserver through `api`; what the apiserver answers to a status write goes to
    `on_written`; writes go through `pacer`."""

    def __init__(self, api: Any, *, pacer: Pacer, on_written: Callable[[Manifest], None] = _ignore_written) -> None:
        self.custom, self.direct = client.CustomObjectsApi(api), Direct(api)
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
            ignored(404, error)
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
        path = custom_path(plural, namespace, name, "status")
        try:
            response = self.paced(lambda: self.direct.send("PATCH", path, body, content_type=MERGE_PATCH))
        except client.ApiException as error:
            status = status_of(error)
            if status == 404:
                raise Gone(f"{namespace}/{name}") from error
            if status == 409:
                raise Conflict(f"{namespace}/{name}") from error
            raise
        written: Manifest = orjson.loads(response.data)
        self.on_written(written)
        return str(written["metadata"]["resourceVersion"])

    def create(self, plural: str, namespace: str, manifest: Manifest) -> bool:
        """Create one, paced: True; False when one of that name was already there."""
        try:
            self.paced(
                lambda: self.custom.create_namespaced_custom_object(
                    GROUP, VERSION, namespace, plural, manifest, _request_timeout=TIMEOUT
                )
            )
        except client.ApiException as error:
            ignored(409, error)
            return False
        return True

    def merge_patch(self, plural: str, namespace: str, name: str, patch: Manifest) -> None:
        """A merge patch of the object (not its status), paced; a missing object is taken as done."""

        def write() -> Any:
            return self.custom.patch_namespaced_custom_object(
                GROUP, VERSION, namespace, plural, name, patch,
                _content_type="application/merge-patch+json", _request_timeout=TIMEOUT,
            )  # fmt: skip

        try:
            self.paced(write)
        except client.ApiException as error:
            ignored(404, error)

    def delete(self, plural: str, namespace: str, name: str, uid: str, resource_version: str | None = None) -> None:
        """Delete the one with this UID (and version, when given), paced, and let the garbage collector take its
        children in the background; a missing one is done, a namesake or a changed one is left alone."""
        body = delete_options(uid, resource_version=resource_version, propagationPolicy="Background")
        try:
            self.paced(
                lambda: self.custom.delete_namespaced_custom_object(
                    GROUP, VERSION, namespace, plural, name, body=body, _request_timeout=TIMEOUT
                )
            )
        except client.ApiException as error:
            deleted(error, f"{plural} {namespace}/{name}")
