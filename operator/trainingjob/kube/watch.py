"""The one list/watch loop, shared by the operator's stores and the REST API's job cache: an Informer lists one
kind of object (page by page), hands the whole list to its Sink, then watches from the list's resourceVersion for
as long as it runs, handing the Sink each event. A watch that ends (its timeout, a dropped connection) resumes
from the last version seen, kept fresh by bookmarks; one the apiserver can no longer resume (410 Gone) is
replaced by a new list, which the Sink takes whole, so an object deleted while no watch was open is dropped too.

Each informer is one thread with its own connection; the Sink is called from it. `events` reads one WATCH
request's events; the SDK follows a single job with it.
"""

import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
import urllib3
from kubernetes import client

from trainingjob.kube.answers import Answer, from_status, status_of

log = logging.getLogger(__name__)
Manifest = dict[str, Any]
PAGE = 500
WATCH_SECONDS = 300  # the apiserver ends each watch after this; the informer resumes it
READ_GRACE = 30  # bookmarks arrive about once a minute: silence this much past the watch's end is a dead connection
RETRY = (0.2, 1.0)  # first and longest delay between failed lists or watches: back within a second
NOT_SERVED_RETRY = 10.0  # a kind the apiserver does not serve (its CRD not installed yet): look again this often


class Expired(Exception):  # noqa: N818
    """410 Gone: the apiserver no longer holds the version to resume from; list (or read) again."""


class WatchError(Exception):
    """An ERROR event other than 410 Gone, as the apiserver's Answer (status None: a line that is no event)."""

    def __init__(self, answer: Answer) -> None:
        super().__init__(f"watch error {answer.status}: {answer.message}")
        self.answer = answer


@dataclass(frozen=True)
class Source:
    """One kind of object to list and watch: its collection's path and selectors."""

    resource: str
    path: str
    label_selector: str = ""
    field_selector: str = ""

    def query(self, *pairs: tuple[str, Any]) -> list[tuple[str, Any]]:
        selectors = [("labelSelector", self.label_selector), ("fieldSelector", self.field_selector)]
        return [*pairs, *((key, value) for key, value in selectors if value)]


class Sink(Protocol):
    """Where an informer puts what it reads: a whole list (read at `version`), then one event at a time."""

    def replace(self, items: list[Any], version: str) -> None: ...  # what the informer's `keep` made of each
    def apply(self, kind: str, item: Manifest) -> None: ...


def request(api: Any, path: str, query: list[tuple[str, Any]], timeout: Any) -> urllib3.HTTPResponse:
    """One GET of the apiserver as a raw response (read by the caller: no model round trip); an error answer is
    raised as the client's ApiException, 410 Gone as Expired."""
    serialized = api.param_serialize(
        "GET", path, query_params=query, header_params={"Accept": "application/json"}, auth_settings=["BearerToken"]
    )
    answer = api.call_api(*serialized, _request_timeout=timeout)
    if not 200 <= answer.status <= 299:
        answer.read()
        error = client.ApiException.from_response(http_resp=answer, body=None, data=None)
        if error.status == 410:
            raise Expired(error.reason) from error
        raise error
    response: urllib3.HTTPResponse = answer.response
    return response


def as_is(manifest: Manifest) -> Manifest:
    """What an informer keeps of an object by default: the object."""
    return manifest


def list_all(
    api: Any, source: Source, page: int = PAGE, timeout: Any = (5, 60), keep: Callable[[Manifest], Any] = as_is
) -> tuple[list[Any], str]:
    """Every object of the source, read page by page, as `keep` makes it of each (one page at a time: what it
    drops is gone before the next page is read), and the list's resourceVersion (Expired if a continue token
    expired: start over)."""
    items: list[Any] = []
    version, token = "", ""
    while True:
        query = source.query(("limit", page), *([("continue", token)] if token else []))
        found = orjson.loads(request(api, source.path, query, timeout).data)
        items += map(keep, found.get("items") or [])
        version = version or str(found["metadata"]["resourceVersion"])
        token = str(found["metadata"].get("continue") or "")
        if not token:
            return items, version


def watch(api: Any, source: Source, version: str, seconds: int, connect_timeout: float) -> urllib3.HTTPResponse:
    """Open one WATCH of the source from `version`, bookmarks on, ended by the apiserver after `seconds`."""
    query = source.query(
        ("watch", "true"), ("resourceVersion", version), ("allowWatchBookmarks", "true"), ("timeoutSeconds", seconds)
    )
    return request(api, source.path, query, (connect_timeout, seconds + READ_GRACE))


def events(response: urllib3.HTTPResponse) -> Iterator[tuple[str, Manifest]]:
    """The events of one WATCH response as (type, object): ADDED, MODIFIED, DELETED, BOOKMARK. An ERROR event is
    raised: Expired for 410 Gone, WatchError for any other."""
    for line in response:
        if not line.strip():
            continue
        try:
            event = orjson.loads(line)
        except ValueError:
            event = None
        if not isinstance(event, dict):
            raise WatchError(Answer(None, f"the watch sent a line that is not an event: {line[:100]!r}", "BadResponse"))
        kind, found = str(event.get("type")), event.get("object")
        found = found if isinstance(found, dict) else {}
        if kind == "ERROR":
            code = found.get("code")
            if code == 410:
                raise Expired(found.get("message"))
            raise WatchError(from_status(code if isinstance(code, int) else 0, found))
        yield kind, found


class Informer:
    """Keeps `sink` in step with `source` from a thread of its own. `synced` is set once a whole list went in;
    `current` while it is up to date (from a list until listing or watching fails). `on_relist` is told of each list
    after the first (a watch that could not resume)."""

    def __init__(
        self,
        api: Any,
        source: Source,
        sink: Sink,
        *,
        on_relist: Callable[[str], None] = lambda _: None,
        page: int = PAGE,
        watch_seconds: int = WATCH_SECONDS,
        connect_timeout: float = 5.0,
        keep: Callable[[Manifest], Any] = as_is,
    ) -> None:
        self.api, self.source, self.sink, self.on_relist, self.keep = api, source, sink, on_relist, keep
        self.page, self.watch_seconds, self.connect_timeout = page, watch_seconds, connect_timeout
        self.version = ""  # the newest resourceVersion seen: the list's, then each event's and bookmark's
        self.synced, self.current = threading.Event(), threading.Event()
        self._stopping = threading.Event()
        self._response: urllib3.HTTPResponse | None = None
        self._thread = threading.Thread(target=self._run, name=f"informer {source.resource}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    @property
    def alive(self) -> bool:
        """Whether it is still watching, or was asked to stop."""
        return self._thread.is_alive() or self._stopping.is_set() or self._thread.ident is None

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping.set()
        response = self._response
        if response is not None:
            response.shutdown()  # unblocks the read the thread is waiting in
        self._thread.join(timeout)

    def _run(self) -> None:
        failures, listed = 0, False
        while not self._stopping.is_set():
            try:
                if not listed:
                    self._list()
                    listed = True
                self._watch()
                failures = 0
            except Expired:
                log.info("%s: the watch can no longer resume; listing again", self.source.resource)
                self.on_relist(self.source.resource)
                listed = False
            except Exception as error:  # the apiserver is down or restarting: retry, never give up
                self.current.clear()
                if self._stopping.is_set():
                    return
                failures += 1
                self._stopping.wait(self._delay(error, failures))

    def _delay(self, error: Exception, failures: int) -> float:
        if status_of(error) == 404:  # the kind is not served: its CRD is not installed (yet)
            if failures == 1:
                log.warning(
                    "%s: the apiserver does not serve them; looking again every %.0f s",
                    self.source.resource,
                    NOT_SERVED_RETRY,
                )
            return NOT_SERVED_RETRY
        delay = float(min(RETRY[0] * 2 ** min(failures - 1, 10), RETRY[1]))
        log.warning("%s: watching failed (%s); retrying in %.1f s", self.source.resource, error, delay)
        return delay

    def _list(self) -> None:
        items, self.version = list_all(self.api, self.source, self.page, (self.connect_timeout, 60), self.keep)
        self.sink.replace(items, self.version)
        log.debug("%s: listed %d at version %s", self.source.resource, len(items), self.version)
        self.synced.set()
        self.current.set()

    def _watch(self) -> None:
        self._response = watch(self.api, self.source, self.version, self.watch_seconds, self.connect_timeout)
        try:
            for kind, found in events(self._response):
                self.version = str((found.get("metadata") or {}).get("resourceVersion") or self.version)
                if kind in ("ADDED", "MODIFIED", "DELETED"):
                    self.sink.apply(kind, found)
        finally:
            self._response.release_conn()
            self._response = None
