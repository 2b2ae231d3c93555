"""A job followed through Kubernetes' watch, past what ends one WATCH request: the server's own time limit and a
connection dropped mid-stream (watched again from the last resourceVersion, after a pause that grows while it keeps
failing), 410 Gone (the version is too old: read the job again and watch from there), and 429 or 5xx in an ERROR
event (retried as a dropped connection is). Any other ERROR is raised as the SDK's typed error."""

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from trainingjob.kube.watch import Expired, WatchError, events
from trainingjob.model import GROUP, PLURAL, VERSION
from trainingjob_sdk.deadline import Deadline, Retry, followed
from trainingjob_sdk.errors import NotFound, TrainingJobError
from trainingjob_sdk.jobs import Manifest, describe_job
from trainingjob_sdk.kube_answers import answering, typed_answer

WATCH_SECONDS = 300  # one WATCH request at most; the watch goes on with the next
READ_GRACE = 30  # past the server's own time limit, a WATCH that sends nothing has lost its connection


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
        """The new versions of the job one WATCH request sends; after 410 Gone the job read again (the next WATCH
        goes on from there); any other ERROR event as the SDK's error (429 and 5xx as Unavailable: retried)."""
        what = describe_job(self.namespace, self.name)
        try:
            for kind, found in self._events(deadline, retry):
                self.version = found.get("metadata", {}).get("resourceVersion", self.version)
                if kind == "DELETED":
                    raise NotFound(f"{what} was deleted", status=404)
                if kind in ("ADDED", "MODIFIED"):
                    yield found
        except Expired:
            current = self._read()
            retry.answered()
            yield current
        except WatchError as error:
            if error.answer.status is None:
                raise TrainingJobError(f"{what}: {error.answer.message}", reason=error.answer.reason) from None
            raise typed_answer(error.answer, what) from None

    def _events(self, deadline: Deadline, retry: Retry) -> Iterator[tuple[str, dict[str, Any]]]:
        """The events of one WATCH request from the last version (kube.watch.events reads them), until the
        deadline; each event, and a clean end, is an answer to `retry`."""
        left = max(1, math.ceil(deadline.left(WATCH_SECONDS)))
        with answering(describe_job(self.namespace, self.name)):
            response = self.custom.list_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, field_selector=f"metadata.name={self.name}", watch=True,
                resource_version=self.version, allow_watch_bookmarks=True, timeout_seconds=left,
                _preload_content=False, _request_timeout=(self.timeout, left + READ_GRACE),
            )  # fmt: skip
            try:
                for kind, found in events(response):
                    retry.answered()
                    yield kind, found
                    if deadline.passed():
                        return
                retry.answered()
            finally:
                response.close()  # an event stream left unread must not go back to the pool
                response.release_conn()
