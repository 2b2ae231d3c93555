"""The one list/watch loop (kube.watch.Informer) against a scripted apiserver: a list goes to the Sink whole, the
watch resumes from the newest version seen (events and bookmarks), and a watch that can no longer resume (410
Gone) is replaced by a new list, which drops what was deleted while no watch was open."""

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from trainingjob.kube.watch import Informer, Source, list_all

pytestmark = pytest.mark.fast
Manifest = dict[str, Any]
TIMEOUT = 10.0


def pod(name: str, version: int) -> Manifest:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": str(version)}}


class Answer:
    """One response: a JSON body, or the lines of a watch."""

    def __init__(self, body: Manifest | None = None, lines: list[Manifest] | None = None, status: int = 200) -> None:
        self.status, self.body, self.lines = status, body, lines or []
        self.response = self

    @property
    def data(self) -> bytes:
        return json.dumps(self.body).encode()

    def __iter__(self) -> Iterator[bytes]:
        for line in self.lines:
            yield json.dumps(line).encode() + b"\n"

    def read(self) -> bytes:
        return self.data

    def release_conn(self) -> None:
        pass


class Apiserver:
    """Answers GETs from a script, in order; once the script is done, a watch that waits until the test ends."""

    def __init__(self, script: list[Answer]) -> None:
        self.script, self.asked = script, list[dict[str, Any]]()
        self.idle, self.done = threading.Event(), threading.Event()

    def param_serialize(
        self, method: str, path: str, *, query_params: list[tuple[str, Any]], **_: Any
    ) -> tuple[str, str, dict[str, Any]]:
        return method, path, dict(query_params)

    def call_api(self, method: str, path: str, query: dict[str, Any], *, _request_timeout: Any) -> Answer:
        self.asked.append(query)
        if self.script:
            return self.script.pop(0)
        self.idle.set()
        self.done.wait(TIMEOUT)
        return Answer(lines=[])


class Sink:
    def __init__(self) -> None:
        self.objects: dict[str, str] = {}
        self.lists = 0

    def replace(self, items: list[Manifest], version: str) -> None:
        self.lists += 1
        self.objects = {i["metadata"]["name"]: i["metadata"]["resourceVersion"] for i in items}

    def apply(self, kind: str, item: Manifest) -> None:
        name = item["metadata"]["name"]
        if kind == "DELETED":
            self.objects.pop(name, None)
        else:
            self.objects[name] = item["metadata"]["resourceVersion"]


def listed(*items: Manifest, version: int) -> Answer:
    return Answer({"items": list(items), "metadata": {"resourceVersion": str(version)}})


def run(script: list[Answer]) -> tuple[Apiserver, Sink, Informer]:
    api, sink = Apiserver(script), Sink()
    informer = Informer(api, Source("pods", "/api/v1/pods", "job"), sink)
    informer.start()
    assert api.idle.wait(TIMEOUT), "the informer did not get through the script"
    api.done.set()
    informer.stop()
    return api, sink, informer


def test_a_watch_resumes_from_the_newest_version_seen_events_and_bookmarks_alike() -> None:
    api, sink, informer = run(
        [
            listed(pod("a", 5), version=10),
            Answer(lines=[{"type": "MODIFIED", "object": pod("a", 11)}, {"type": "BOOKMARK", "object": pod("", 15)}]),
        ]
    )
    watches = [q for q in api.asked if q.get("watch") == "true"]
    assert [q["resourceVersion"] for q in watches] == ["10", "15"] and informer.version == "15"
    assert sink.objects == {"a": "11"} and all(q["labelSelector"] == "job" for q in api.asked)


def test_a_watch_that_cannot_resume_is_replaced_by_a_list_that_drops_what_went_meanwhile() -> None:
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old resource version"}}
    _, sink, informer = run(
        [
            listed(pod("a", 5), pod("b", 6), version=10),
            Answer(lines=[gone]),
            listed(pod("a", 5), version=20),  # b was deleted while no watch was open: no DELETED event ever came
        ]
    )
    assert sink.lists == 2 and sink.objects == {"a": "5"} and informer.synced.is_set()


def test_a_list_refused_as_expired_is_started_again() -> None:
    _, sink, _ = run([Answer({"kind": "Status", "code": 410}, status=410), listed(pod("a", 5), version=10)])
    assert sink.lists == 1 and sink.objects == {"a": "5"}


def test_a_list_keeps_what_keep_makes_of_each_page_before_reading_the_next() -> None:
    first = Answer({"items": [pod("a", 1), pod("b", 2)], "metadata": {"resourceVersion": "2", "continue": "next"}})
    api = Apiserver([first, listed(pod("c", 3), version=2)])
    kept: list[tuple[str, int]] = []

    def keep(item: Manifest) -> str:
        kept.append((item["metadata"]["name"], len(api.asked)))  # how many pages were asked for by then
        return str(item["metadata"]["name"])

    items, version = list_all(api, Source("pods", "/api/v1/pods", "job"), page=2, keep=keep)
    assert (items, version) == (["a", "b", "c"], "2")
    assert kept == [("a", 1), ("b", 1), ("c", 2)]  # the first page went through keep before the second was read
    assert [query.get("continue") for query in api.asked] == [None, "next"]
