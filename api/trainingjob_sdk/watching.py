"""A job followed through Kubernetes' watch, past what ends one WATCH request: the server's own time limit and a
connection dropped mid-stream (watched again from the last resourceVersion, after a pause that grows while it keeps
failing), 410 Gone (the version is too old: read the job again and watch from there), and 429 or 5xx in an ERROR
event (retried as a dropped connection is). Any other ERROR is raised as the SDK's typed error."""

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kubernetes.watch.watch import iter_resp_lines

from trainingjob.model import GROUP, PLURAL, VERSION
from trainingjob_sdk.deadline import Deadline, Retry, followed
from trainingjob_sdk.errors import NotFound
from trainingjob_sdk.jobs import Manifest, describe_job, json_object
from trainingjob_sdk.kube_answers import answering, status_error

WATCH_SECONDS = 300  # one WATCH request at most; the watch goes on with the next
READ_GRACE = 30  # past the server's own time limit, a WATCH that sends nothing has lost its connection
GONE = 410


@dataclass
class JobWatch:
    """One job's WATCH requests: `custom` is the CustomObjectsApi, `get` reads the job now, `timeout` bounds the
    connection (None: no bound); `version` is the resourceVersion the next WATCH starts from."""

    custom: Any
    get: Callable[[], Manifest]
    namespace: str
    name: str
    timeout: float | None
    version: str = ""

    def follow(self, seconds: float | None) -> Iterator[Manifest]:
        """The job now, then every new version of it, until `seconds` have passed (forever when None); NotFound
        once it is deleted."""
        return followed(seconds, self._read, self._stream)

    def _read(self) -> Manifest:
        current = self.get()
        self.version = current["metadata"]["resourceVersion"]
        return current

    def _stream(self, deadline: Deadline, retry: Retry) -> Iterator[Manifest]:
        """The new versions of the job one WATCH request sends; after 410 Gone the job read again, and the next
        WATCH from there."""
        for kind, found in self._events(self.version, deadline, retry):
            if kind == "ERROR":
                current = self._gone(found)
                retry.answered()
                yield current
                return
            self.version = found.get("metadata", {}).get("resourceVersion", self.version)
            if kind in ("ADDED", "MODIFIED"):
                yield found

    def _gone(self, status: dict[str, Any]) -> Manifest:
        """The job read again after an ERROR event that is 410 Gone; any other as the SDK's error."""
        code = status.get("code")
        if code != GONE:
            raise status_error(
                int(code) if isinstance(code, int) else 0, status, describe_job(self.namespace, self.name)
            )
        return self._read()

    def _events(self, version: str, deadline: Deadline, retry: Retry) -> Iterator[tuple[str, dict[str, Any]]]:
        """The events of one WATCH request from `version` (the type and the object), until the deadline; each
        event but an ERROR, and a clean end, is an answer to `retry`."""
        what = describe_job(self.namespace, self.name)
        left = max(1, math.ceil(deadline.left(WATCH_SECONDS)))
        with answering(what):
            response = self.custom.list_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, field_selector=f"metadata.name={self.name}", watch=True,
                resource_version=version, allow_watch_bookmarks=True, timeout_seconds=left, _preload_content=False,
                _request_timeout=(self.timeout, left + READ_GRACE),
            )  # fmt: skip
            try:
                for line in iter_resp_lines(response):
                    if line:
                        kind, found = _event(line, what)
                        if kind != "ERROR":
                            retry.answered()
                        yield kind, found
                    if deadline.passed():
                        return
                retry.answered()
            finally:
                response.close()  # an event stream left unread must not go back to the pool
                response.release_conn()


def _event(line: str, what: str) -> tuple[str, dict[str, Any]]:
    event = json_object(line, f"the watch of {what} sent a line that is not an event")
    kind, found = str(event.get("type")), event.get("object")
    if kind == "DELETED":
        raise NotFound(f"{what} was deleted", status=404)
    return kind, found if isinstance(found, dict) else {}
