"""Keep a Store in step with the apiserver: list one kind of object (page by page), then watch it from the list's
resourceVersion, for as long as the operator runs. A watch that ends (its timeout, a dropped connection) resumes
from the last version seen, kept fresh by bookmarks; one the apiserver can no longer resume (410 Gone) is
replaced by a new list, and the jobs whose objects changed meanwhile are woken like any others.

Each informer is one thread with its own connection; `on_change` is called from it with the jobs (namespace,
name) whose objects changed.
"""

import json
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import urllib3
from kubernetes import client

from trainingjob.children.naming import JOB_LABEL
from trainingjob.model import GROUP, PLURAL, VERSION
from trainingjob.model.sweep import SWEEP_PLURAL
from trainingjob.runtime.store import Key, Manifest, Store
from trainingjob.sweep.trials import SWEEP_LABEL

log = logging.getLogger(__name__)
PAGE = 500
WATCH_SECONDS = 300  # the apiserver ends each watch after this; the informer resumes it
READ_TIMEOUT = WATCH_SECONDS + 30  # bookmarks arrive about once a minute: silence this long is a dead connection
RETRY = (0.2, 1.0)  # first and longest delay between failed lists or watches: back within a second
NOT_SERVED_RETRY = 10.0  # a kind the apiserver does not serve (its CRD not installed yet): look again this often


class Expired(Exception):  # noqa: N818
    """410 Gone: the apiserver no longer holds the version to resume from; list again."""


@dataclass(frozen=True)
class Source:
    """One kind of object the operator watches: its collection's path and a label selector."""

    resource: str
    path: str
    label_selector: str = ""


def sources(namespace: str) -> tuple[Source, ...]:
    """In one namespace or ("") in all: the jobs, and the pods and Services that carry a job label; the sweeps, and
    the jobs that carry a sweep label (their trials)."""
    scope = f"/namespaces/{namespace}" if namespace else ""
    return (
        Source("trainingjobs", f"/apis/{GROUP}/{VERSION}{scope}/{PLURAL}"),
        Source("pods", f"/api/v1{scope}/pods", JOB_LABEL),
        Source("services", f"/api/v1{scope}/services", JOB_LABEL),
        Source("trainingsweeps", f"/apis/{GROUP}/{VERSION}{scope}/{SWEEP_PLURAL}"),
        Source("trials", f"/apis/{GROUP}/{VERSION}{scope}/{PLURAL}", SWEEP_LABEL),
    )


class Informer:
    def __init__(
        self,
        api: client.ApiClient,
        source: Source,
        store: Store,
        on_change: Callable[[set[Key]], None],
        *,
        on_relist: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.api, self.source, self.store = api, source, store
        self.on_change, self.on_relist = on_change, on_relist
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
                if self._stopping.is_set():
                    return
                failures += 1
                if isinstance(error, client.ApiException) and error.status == 404:  # its CRD is not installed
                    if failures == 1:
                        log.warning(
                            "%s: the apiserver does not serve them; looking again every %.0f s",
                            self.source.resource,
                            NOT_SERVED_RETRY,
                        )
                    self._stopping.wait(NOT_SERVED_RETRY)
                    continue
                delay = min(RETRY[0] * 2 ** min(failures - 1, 10), RETRY[1])
                log.warning("%s: watching failed (%s); retrying in %.1f s", self.source.resource, error, delay)
                self._stopping.wait(delay)

    def _get(self, query: list[tuple[str, Any]], timeout: tuple[float, float]) -> urllib3.HTTPResponse:
        if self.source.label_selector:
            query.append(("labelSelector", self.source.label_selector))
        request = self.api.param_serialize(
            "GET",
            self.source.path,
            query_params=query,
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
        )
        answer = self.api.call_api(*request, _request_timeout=timeout)
        if not 200 <= answer.status <= 299:
            answer.read()
            raise client.ApiException.from_response(http_resp=answer, body=None, data=None)
        response: urllib3.HTTPResponse = answer.response
        return response

    def _list(self) -> None:
        items: list[Manifest] = []
        version, token = "", ""
        while True:
            query: list[tuple[str, Any]] = [("limit", PAGE)] + ([("continue", token)] if token else [])
            try:
                page = json.loads(self._get(query, (5, 60)).data)
            except client.ApiException as error:
                if error.status == 410:  # the continue token expired: start over
                    raise Expired from error
                raise
            items += page.get("items") or []
            version = version or str(page["metadata"]["resourceVersion"])
            token = str(page["metadata"].get("continue") or "")
            if not token:
                break
        changed = self.store.replace(items, version)
        log.debug("%s: listed %d at version %s", self.source.resource, len(items), version)
        if changed:
            self.on_change(changed)

    def _watch(self) -> None:
        query: list[tuple[str, Any]] = [
            ("watch", "true"),
            ("resourceVersion", self.store.version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", WATCH_SECONDS),
        ]
        try:
            self._response = self._get(query, (5, READ_TIMEOUT))
        except client.ApiException as error:
            if error.status == 410:
                raise Expired from error
            raise
        try:
            for event in _lines(self._response):
                self._take(event)
        finally:
            self._response.release_conn()
            self._response = None

    def _take(self, event: Manifest) -> None:
        kind, manifest = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if manifest.get("code") == 410:
                raise Expired(manifest.get("message"))
            raise RuntimeError(f"watch error: {manifest.get('message')}")
        if kind == "BOOKMARK":
            self.store.bookmark(str(manifest["metadata"]["resourceVersion"]))
            return
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            changed = self.store.apply(kind, manifest)
            if changed:
                self.on_change(changed)


def _lines(response: urllib3.HTTPResponse) -> Iterator[Manifest]:
    """The watch's events, one JSON object per line."""
    for line in response:
        if line.strip():
            yield json.loads(line)
