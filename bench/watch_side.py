"""One side of bench_watch.py, in a process of its own so its CPU is its own: follow the pods that carry a job
label in one namespace, with our informer (kube.watch, the operator's) or with kopf's watch stream and an
@kopf.on.event handler, and say on stdout when the list is in and when the expected events have arrived, with the
process's CPU seconds at each point.

Run: python bench/watch_side.py ours|kopf KUBECONFIG NAMESPACE LISTED EVENTS
"""

import asyncio
import logging
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "operator")]

from trainingjob.children.naming import JOB_LABEL  # noqa: E402
from trainingjob.children.observe import essentials  # noqa: E402
from trainingjob.kube.client import connect  # noqa: E402
from trainingjob.kube.watch import Informer, Source  # noqa: E402
from trainingjob.runtime.store import Store  # noqa: E402


class Counter:
    """Says LISTED once `listed` objects are in, then DONE once `events` watch events came after that."""

    def __init__(self, listed: int, events: int) -> None:
        self.listed, self.events = listed, events
        self.seen_listed, self.seen_events = 0, 0
        self.done = threading.Event()

    def took_listed(self, count: int = 1) -> None:
        before = self.seen_listed
        self.seen_listed += count
        if before < self.listed <= self.seen_listed:
            say("LISTED")

    def took_event(self) -> None:
        self.seen_events += 1
        if self.seen_events == self.events:
            say("DONE")
            self.done.set()


def say(what: str) -> None:
    print(f"{what} {time.process_time():.4f} {time.monotonic():.4f}", flush=True)


class CountingStore:
    """The operator's Store (essentials kept, indexed by job) as a Sink, counting what it takes."""

    def __init__(self, counter: Counter) -> None:
        self.counter = counter
        self.store = Store(lambda m: (m["metadata"].get("labels") or {}).get(JOB_LABEL), keep=essentials)

    def replace(self, items: list[dict[str, Any]], version: str) -> None:
        self.store.replace(items, version)
        self.counter.took_listed(len(items))

    def apply(self, kind: str, item: dict[str, Any]) -> None:
        self.store.apply(kind, item)
        self.counter.took_event()


def ours(kubeconfig: str, namespace: str, counter: Counter) -> None:
    connection = connect(kubeconfig)
    source = Source("pods", f"/api/v1/namespaces/{namespace}/pods", JOB_LABEL)
    informer = Informer(connection.api, source, CountingStore(counter))
    informer.start()
    counter.done.wait()
    informer.stop()


def with_kopf(kubeconfig: str, namespace: str, counter: Counter) -> None:
    import kopf  # noqa: PLC0415  (kopf logs in with $KUBECONFIG, which bench_watch.py sets)

    store = CountingStore(counter).store  # the same memory as ours, fed from kopf's events

    @kopf.on.startup()
    async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False
        settings.watching.server_timeout = 300

    @kopf.on.event("", "v1", "pods", labels={JOB_LABEL: kopf.PRESENT})
    async def pod_event(event: Any, **_: Any) -> None:
        kind, body = event.get("type"), event["object"]
        if kind is None:  # kopf's initial listing
            store.apply("ADDED", body)
            counter.took_listed()
        else:
            store.apply(str(kind), body)
            counter.took_event()

    async def run() -> None:
        stop = asyncio.Event()
        operator = kopf.operator(standalone=True, namespaces=[namespace], clusterwide=False, stop_flag=stop)
        task = asyncio.create_task(operator)
        await asyncio.to_thread(counter.done.wait)
        stop.set()
        await task

    asyncio.run(run())


def main() -> None:
    side, kubeconfig, namespace, listed, events = sys.argv[1:6]
    logging.basicConfig(level=logging.WARNING)
    counter = Counter(int(listed), int(events))
    say("START")
    (ours if side == "ours" else with_kopf)(kubeconfig, namespace, counter)


if __name__ == "__main__":
    main()
