"""Streams (followed logs, watches) re-check their caller while they run: every `period` the caller's token is
reviewed again (TokenReview) and the access the stream was opened with (SubjectAccessReview); the stream ends when
either is refused, so revoking a token or a RoleBinding reaches open streams too, not only new requests."""

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field

import anyio
from kubernetes.client import ApiException
from starlette.concurrency import run_in_threadpool
from urllib3.exceptions import HTTPError

from trainingjob.kube.reviews import Access, Authenticator, Authorizer, Caller

log = logging.getLogger(__name__)


def due(last: float, now: float, period: float) -> float:
    """Seconds until the next re-check; 0 when it is due."""
    return max(0.0, last + period - now)


def revocation(opened_by: str, now: Caller | None, refused: Sequence[Access]) -> str | None:
    """Why the stream of user `opened_by` must end: its token is no longer accepted, or names someone else, or
    an access is now refused (to the caller as the token names them now: their groups may have changed); None
    while it may go on."""
    if now is None:
        return "the bearer token is no longer accepted by Kubernetes (TokenReview)"
    if now.username != opened_by:
        return f'the bearer token now names user "{now.username}", not "{opened_by}"'
    if refused:
        return f'user "{opened_by}" {refused[0].describe()}'
    return None


def sse_ending(why: str) -> bytes:
    """The last event of a server-sent-events stream ended by its re-check."""
    return b"event: ended\ndata: " + json.dumps({"reason": why}).encode() + b"\n\n"


def no_ending(_: str) -> bytes:
    """A log stream ends without a word: a line of ours would read as the pod's own."""
    return b""


@dataclass
class StreamGuard:
    """The caller's token and the accesses its stream was opened with, reviewed again every `period` seconds."""

    authenticator: Authenticator
    authorizer: Authorizer
    token: str
    caller: Caller
    accesses: tuple[Access, ...]
    period: float
    clock: Callable[[], float] = time.monotonic
    on_review: Callable[[], None] = lambda: None  # e.g. forget which namespaces a summary stream may show
    last: float = field(default=0.0)

    def __post_init__(self) -> None:
        self.last = self.clock()  # the stream's own request has just been reviewed

    def wait(self) -> float:
        return due(self.last, self.clock(), self.period)

    def review(self) -> str | None:
        """Why the stream must end, now; blocking (it may ask Kubernetes)."""
        self.last = self.clock()
        try:
            self.on_review()
            now = self.authenticator.authenticate(self.token)
            refused = [a for a in self.accesses if now is not None and not self.authorizer.allows(now, a)]
        except (ApiException, HTTPError) as error:
            return f"Kubernetes did not answer the token's review: {type(error).__name__}"
        return revocation(self.caller.username, now, refused)


async def guarded(
    chunks: AsyncIterator[bytes], guard: StreamGuard, ending: Callable[[str], bytes]
) -> AsyncIterator[bytes]:
    """`chunks`, until the guard's review refuses the caller: then `ending(why)` and the end (`chunks` closed,
    so its own clean-up runs). The review is due every period whether chunks come or not."""
    pending: asyncio.Future[bytes] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(chunks))
            done, _ = await asyncio.wait({pending}, timeout=guard.wait())
            if done:
                try:
                    chunk = pending.result()
                except StopAsyncIteration:
                    return
                pending = None
                yield chunk
            if not guard.wait() and (why := await run_in_threadpool(guard.review)) is not None:
                log.info("a stream of user %r ended: %s", guard.caller.username, why)
                if last := ending(why):
                    yield last
                return
    finally:
        with anyio.CancelScope(shield=True):  # the caller left: `chunks` is closed all the same
            if pending is not None and not pending.done():
                pending.cancel()
                with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                    await pending
            aclose = getattr(chunks, "aclose", None)
            if aclose is not None:
                await aclose()
