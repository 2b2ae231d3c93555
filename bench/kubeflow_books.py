"""Watches for bench/bench_kubeflow.py: a list+watch of pods or jobs streamed into a book of what it has seen, and
waiters that the watch thread tells, with the event's arrival time, once their condition over the book holds."""

import contextlib
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trainingjob.children.naming import ATTEMPT_LABEL

Json = dict[str, Any]


class Waiter:
    """A condition over a book, checked by the watch thread after every event; `at` is the event's arrival."""

    def __init__(self, predicate: Callable[[Any], bool]) -> None:
        self.predicate = predicate
        self.at: float | None = None
        self.done = threading.Event()


class Book:
    """What a watch has seen, updated by its thread; waiters are told (with the arrival time) when they hold."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.waiters: list[Waiter] = []
        self.error: BaseException | None = None

    def apply(self, kind: str, obj: Json, at: float) -> None:
        raise NotImplementedError

    def replace(self, items: list[Json], at: float) -> None:
        raise NotImplementedError

    def event(self, kind: str, obj: Json, at: float) -> None:
        with self.lock:
            self.apply(kind, obj, at)
            self._check(at)

    def relisted(self, items: list[Json], at: float) -> None:
        with self.lock:
            self.replace(items, at)
            self._check(at)

    def _check(self, at: float) -> None:
        for waiter in [w for w in self.waiters if w.predicate(self)]:
            waiter.at = at
            waiter.done.set()
            self.waiters.remove(waiter)

    def fail(self, error: BaseException) -> None:
        with self.lock:
            self.error = error
            for waiter in self.waiters:
                waiter.done.set()

    def expect(self, predicate: Callable[[Any], bool]) -> Waiter:
        waiter = Waiter(predicate)
        with self.lock:
            if self.error is not None:
                raise RuntimeError("the watch stopped") from self.error
            if predicate(self):
                waiter.at = time.monotonic()
                waiter.done.set()
            else:
                self.waiters.append(waiter)
        return waiter

    def wait(self, waiter: Waiter, timeout: float, what: str) -> float:
        if not waiter.done.wait(timeout):
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        if waiter.at is None:
            raise RuntimeError(f"the watch stopped while waiting for {what}") from self.error
        return waiter.at


@dataclass
class PodState:
    name: str
    owner: str
    attempt: str | None
    running: bool = False
    running_since: float | None = None  # when the watch first saw it Running


class PodBook(Book):
    """Pods of one namespace: which run (phase Running, not being deleted) and since when."""

    def __init__(self) -> None:
        super().__init__()
        self.pods: dict[str, PodState] = {}
        self.uids: dict[str, str] = {}
        self.running: set[str] = set()
        self.running_by_attempt: Counter[str | None] = Counter()

    def apply(self, kind: str, obj: Json, at: float) -> None:
        meta = obj["metadata"]
        uid = meta["uid"]
        state = self.pods.get(uid)
        if state is None:
            owners = meta.get("ownerReferences") or [{}]
            attempt = (meta.get("labels") or {}).get(ATTEMPT_LABEL)
            state = self.pods[uid] = PodState(meta["name"], owners[0].get("name", ""), attempt)
            self.uids[state.name] = uid
        running = kind != "DELETED" and (obj.get("status") or {}).get("phase") == "Running"
        running = running and not meta.get("deletionTimestamp")
        if running and state.running_since is None:
            state.running_since = at
        if running != state.running:
            state.running = running
            (self.running.add if running else self.running.discard)(uid)
            self.running_by_attempt[state.attempt] += 1 if running else -1
        if kind == "DELETED":
            del self.pods[uid]
            if self.uids.get(state.name) == uid:
                del self.uids[state.name]

    def replace(self, items: list[Json], at: float) -> None:
        present = {item["metadata"]["uid"] for item in items}
        for uid in [u for u in self.pods if u not in present]:
            self.apply("DELETED", {"metadata": {"uid": uid, "name": self.pods[uid].name}}, at)
        for item in items:
            self.apply("MODIFIED", item, at)

    def gangs_complete_at(self) -> dict[str, float]:
        """Per owner (job): when the last of its running pods became Running."""
        with self.lock:
            latest: dict[str, float] = {}
            for pod in self.pods.values():
                if pod.running and pod.running_since is not None:
                    latest[pod.owner] = max(latest.get(pod.owner, 0.0), pod.running_since)
            return latest


class JobBook(Book):
    """Jobs of one namespace: whether each one's status says Running, and when that changed."""

    def __init__(self, says_running: Callable[[Json], bool]) -> None:
        super().__init__()
        self.says_running = says_running
        self.running: set[str] = set()
        self.changes: dict[str, list[tuple[float, bool]]] = {}

    def apply(self, kind: str, obj: Json, at: float) -> None:
        name = obj["metadata"]["name"]
        running = kind != "DELETED" and self.says_running(obj)
        changes = self.changes.setdefault(name, [])
        if not changes or changes[-1][1] != running:
            changes.append((at, running))
        (self.running.add if running else self.running.discard)(name)

    def replace(self, items: list[Json], at: float) -> None:
        present = {item["metadata"]["name"] for item in items}
        for name in [n for n in self.running if n not in present]:
            self.apply("DELETED", {"metadata": {"name": name}}, at)
        for item in items:
            self.apply("MODIFIED", item, at)

    def running_since(self, name: str, after: float) -> float | None:
        """When the job's status last turned to Running, if it says Running and that was after `after`."""
        with self.lock:
            changes = self.changes.get(name, [])
            if not changes or not changes[-1][1] or changes[-1][0] < after:
                return None
            return changes[-1][0]


Lister = Callable[..., Any]  # a typed client's list_namespaced_* method, bound to the namespace's arguments


class Watch(threading.Thread):
    """One list+watch of a collection, streamed as raw JSON lines into a Book (no model deserialization)."""

    def __init__(self, lister: Lister, book: Book) -> None:
        super().__init__(daemon=True, name="bench watch")
        self.lister, self.book = lister, book
        self.stopping = threading.Event()
        self.response: Any = None
        self.version = self._list()

    def _list(self) -> str:
        listed = json.loads(self.lister(_preload_content=False).data)
        self.book.relisted(listed["items"], time.monotonic())
        return str(listed["metadata"]["resourceVersion"])

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                self.response = self.lister(
                    watch=True,
                    resource_version=self.version,
                    allow_watch_bookmarks=True,
                    timeout_seconds=600,
                    _preload_content=False,
                    _request_timeout=(10, 900),  # the server ends it after 600 s
                )
                self._stream(self.response)
        except BaseException as error:
            if not self.stopping.is_set():
                self.book.fail(error)

    def _stream(self, response: Any) -> None:
        pending = b""
        for chunk in response.stream(1 << 16):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line.strip():
                    self._handle(json.loads(line))

    def _handle(self, event: Json) -> None:
        kind, obj = event["type"], event["object"]
        if kind == "ERROR":
            if obj.get("code") == 410:  # too old: list again
                self.version = self._list()
                return
            raise RuntimeError(f"watch: {obj}")
        self.version = obj["metadata"]["resourceVersion"]
        if kind != "BOOKMARK":
            self.book.event(kind, obj, time.monotonic())

    def stop(self) -> None:
        self.stopping.set()
        if self.response is not None:
            with contextlib.suppress(Exception):
                self.response.shutdown()
            with contextlib.suppress(Exception):
                self.response.release_conn()
        self.join(timeout=10)
