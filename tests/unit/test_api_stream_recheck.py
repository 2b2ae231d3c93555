"""Open streams review their caller again every period (TJ_API_STREAM_RECHECK_SECONDS) and end, saying why, once
the token is no longer accepted or the access it was opened with is refused."""

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import cast

import pytest
from tests.support import api_app
from tests.support.api_app import JOBS, NS, Rules, Tokens, served
from tests.support.builders import job_manifest

from trainingjob.kube.reviews import Access, Authenticator, Authorizer, Caller
from trainingjob.model import GROUP, PLURAL
from trainingjob_api.settings import ApiSettings
from trainingjob_api.streams import StreamGuard, due, guarded, revocation, sse_ending

pytestmark = pytest.mark.fast
WATCH = Access("watch", GROUP, PLURAL, NS, name="mnist")
DELETE = Access("delete", GROUP, PLURAL, NS, name="mnist")


@pytest.mark.parametrize(
    ("now", "refused", "why"),
    [
        pytest.param(Caller("reader"), [], None, id="same user, allowed: goes on"),
        pytest.param(Caller("reader", groups=("new",)), [], None, id="groups changed, still allowed: goes on"),
        pytest.param(None, [], "no longer accepted by Kubernetes (TokenReview)", id="token refused"),
        pytest.param(Caller("writer"), [], 'now names user "writer", not "reader"', id="another user"),
        pytest.param(Caller("reader"), [DELETE], 'user "reader" cannot delete resource', id="access refused"),
    ],
)
def test_a_stream_ends_when_its_token_or_its_access_is_refused(
    now: Caller | None, refused: list[Access], why: str | None
) -> None:
    said = revocation("reader", now, refused)
    assert said == why if why is None else why in (said or "")


@pytest.mark.parametrize(
    ("last", "now", "wait"),
    [pytest.param(0, 10, 50, id="within the period"), pytest.param(0, 60, 0, id="at the period"),
     pytest.param(0, 90, 0, id="past it")],
)  # fmt: skip
def test_the_recheck_is_due_every_period(last: float, now: float, wait: float) -> None:
    assert due(last, now, 60) == wait


def guard(token: str, access: Access, now: list[float], period: float = 60) -> StreamGuard:
    """A guard over the unit tier's token and rule tables, on the clock `now`."""
    authn, authz = cast(Authenticator, Tokens()), cast(Authorizer, Rules())
    return StreamGuard(authn, authz, token, api_app.TOKENS[token], (access,), period, clock=lambda: now[0])


def test_the_guard_reviews_the_token_and_the_access_again(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [0.0]
    reading, deleting = guard("reader-token", WATCH, now), guard("reader-token", DELETE, now)
    assert reading.wait() == 60 and reading.review() is None
    assert "cannot delete" in (deleting.review() or "")
    now[0] = 30.0
    assert reading.wait() == 30
    monkeypatch.delitem(api_app.TOKENS, "reader-token")
    assert "no longer accepted" in (reading.review() or "")
    assert reading.wait() == 60  # due again a period after its last review


async def endless(first: bytes) -> AsyncIterator[bytes]:
    yield first
    await asyncio.Event().wait()  # nothing more, ever: only the guard ends the stream


async def read_all(chunks: AsyncIterator[bytes]) -> list[bytes]:
    return [chunk async for chunk in chunks]


def test_an_idle_stream_ends_at_the_recheck_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    revoked = guard("reader-token", WATCH, [0.0], period=0)  # due at once, chunks or not
    monkeypatch.delitem(api_app.TOKENS, "reader-token")
    got = asyncio.run(asyncio.wait_for(read_all(guarded(endless(b"first"), revoked, sse_ending)), 10))
    assert got[0] == b"first"
    assert got[1].startswith(b"event: ended\ndata: ")
    assert "no longer accepted" in json.loads(got[1].split(b"data: ")[1])["reason"]


def test_a_stream_whose_caller_keeps_their_rights_goes_on() -> None:
    async def first_two() -> list[bytes]:
        stream = guarded(endless(b"first"), guard("reader-token", WATCH, [0.0], period=0), sse_ending)
        got = [await anext(stream)]
        pending = asyncio.ensure_future(anext(stream))
        done, _ = await asyncio.wait({pending}, timeout=0.2)  # reviewed over and over, allowed each time
        pending.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pending
        return got + [each.result() for each in done]

    assert asyncio.run(first_two()) == [b"first"]


def test_a_watch_through_the_api_ends_once_the_token_is_revoked(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = ApiSettings(stream_recheck_seconds=0.01, sse_keepalive_seconds=0.01)
    with served(settings=settings) as api:
        assert api.post(JOBS, json=job_manifest("mnist")).status_code == 201
        with api.stream("GET", f"{JOBS}/mnist/watch") as stream:
            lines = stream.iter_lines()
            assert next(lines) == "event: status"
            monkeypatch.delitem(api_app.TOKENS, "writer-token")
            seen = [line for _, line in zip(range(200), lines, strict=False)]
    assert "event: ended" in seen, seen[-5:]
    assert "no longer accepted" in seen[seen.index("event: ended") + 1]
