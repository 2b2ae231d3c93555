"""The summary stream's events: only namespaces the caller may list, `deleted` naming the job, keepalives while
idle, and the end of the stream (its listener undone) when the watcher falls too far behind."""

import asyncio
import json
from typing import Any, cast

import pytest
from tests.support.builders import job_manifest

from trainingjob_api.job_cache import CachedJob
from trainingjob_api.routers.dashboard import _summary_events

pytestmark = pytest.mark.fast


class OnlyIn:
    """Rights that allow one namespace."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace

    async def allows(self, namespace: str) -> bool:
        return namespace == self.namespace


def job(namespace: str, name: str) -> CachedJob:
    return CachedJob.from_raw(job_manifest(name, namespace=namespace))


async def read(changes: list[tuple[str, CachedJob]], chunks: int) -> tuple[list[bytes], list[str]]:
    """The first `chunks` chunks of a stream fed `changes`, then the stream told it fell behind."""
    queue: asyncio.Queue[tuple[str, CachedJob]] = asyncio.Queue()
    for change in changes:
        queue.put_nowait(change)
    overflowed, undone = asyncio.Event(), []
    stream = _summary_events(queue, overflowed, cast(Any, OnlyIn("mine")), lambda: undone.append("undone"), 0.01)
    got = [await anext(stream) for _ in range(chunks)]
    overflowed.set()
    got += [chunk async for chunk in stream]
    return got, undone


def test_events_of_listable_namespaces_then_keepalives_until_the_watcher_falls_behind() -> None:
    changes = [
        ("ADDED", job("theirs", "hidden")), ("ADDED", job("mine", "shown")), ("DELETED", job("theirs", "hidden")),
        ("DELETED", job("mine", "shown")),
    ]  # fmt: skip
    got, undone = asyncio.run(read(changes, 4))
    assert got[0] == b": watching\n\n"
    kind, data = got[1].decode().split("\n")[:2]
    assert (kind, json.loads(data.removeprefix("data: "))["name"]) == ("event: summary", "shown")
    assert got[2] == b'event: deleted\ndata: {"namespace": "mine", "name": "shown"}\n\n'
    assert got[3:] == [b": keepalive\n\n"]  # nothing more shown, and the stream ended once told it fell behind
    assert undone == ["undone"]
