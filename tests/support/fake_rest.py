"""The REST API faked for the SDK's REST transport: RestJobs over httpx's MockTransport, and bodies that come in
chunks, then fail."""

from collections.abc import Callable, Iterator

import httpx

from trainingjob_sdk.rest import RestJobs

Handler = Callable[[httpx.Request], httpx.Response]


def rest(handler: Handler, server: str = "http://api.test") -> RestJobs:
    return RestJobs(server, "token", transport=httpx.MockTransport(handler))


class Chunks(httpx.SyncByteStream):
    """A body that comes in `chunks`, then raises `then` (an httpx error) if given."""

    def __init__(self, *chunks: bytes, then: Exception | None = None) -> None:
        self.chunks, self.then = chunks, then

    def __iter__(self) -> Iterator[bytes]:
        yield from self.chunks
        if self.then is not None:
            raise self.then
