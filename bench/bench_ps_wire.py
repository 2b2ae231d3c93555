"""Benchmark: a parameter-server round trip with authenticated frames vs the plain, unauthenticated framing.

Run: python bench/bench_ps_wire.py [--repetitions N] [--sizes-mb 1 50]. A shard-sized message of float32 tensors
goes worker -> server -> worker, the reply carrying tensors as large as the request (as a push's reply carries the
parameters), two ways, measured side by side and alternating which goes first:

- codec: in memory, what each side computes: encode + frame, then check + decode, both ways;
- loopback: over TCP on 127.0.0.1, with the trainer's own client (Connection) and asyncio server functions.

Prints median milliseconds per round trip and the ratio authenticated/plain.
"""

import argparse
import asyncio
import contextlib
import secrets
import socket
import statistics
import struct
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "trainer-image"), str(REPO)]

from trainer.ps_auth import HEADER, Session, new_nonce  # noqa: E402
from trainer.ps_wire import (  # noqa: E402
    Connection,
    Message,
    accept_session,
    decode,
    encode,
    frame_limit,
    read_message,
    write_message,
)

PLAIN = struct.Struct("!Q")
KEY = secrets.token_bytes(32)
TENSORS = 8


def shard_message(megabytes: float) -> Message:
    """A push of `megabytes` of float32 gradients spread over a few tensors."""
    per_tensor = int(megabytes * (1 << 20) / 4 / TENSORS)
    grads = {f"layer{i}.weight": torch.randn(per_tensor) for i in range(TENSORS)}
    return {"op": "push", "worker": 0, "step": 1, "version": 1, "grads": grads}


def codec_plain(message: Message) -> None:
    for _ in range(2):
        data = PLAIN.pack(len(payload := encode(message))) + payload
        message = decode(data[PLAIN.size :])


def codec_authenticated(message: Message, limit: int) -> None:
    server_nonce, client_nonce = new_nonce(), new_nonce()
    worker = Session.start(KEY, server_nonce, client_nonce, server=False, limit=limit)
    server = Session.start(KEY, server_nonce, client_nonce, server=True, limit=limit)
    for sender, receiver in ((worker, server), (server, worker)):
        payload = encode(message)
        header = sender.seal(payload)
        receiver.open_header(header)
        message = decode(receiver.open_body(payload))


class EchoServer:
    """An asyncio server in a thread that answers each message with the same message."""

    def __init__(self, authenticated: bool, limit: int) -> None:
        self.authenticated, self.limit = authenticated, limit
        self.loop = asyncio.new_event_loop()
        self.server = self.loop.run_until_complete(asyncio.start_server(self.handle, "127.0.0.1", 0))
        self.port = int(self.server.sockets[0].getsockname()[1])
        threading.Thread(target=self.loop.run_forever, daemon=True).start()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            if not self.authenticated:
                while True:
                    (length,) = PLAIN.unpack(await reader.readexactly(PLAIN.size))
                    payload = encode(decode(await reader.readexactly(length)))
                    writer.writelines((PLAIN.pack(len(payload)), payload))
                    await writer.drain()
            elif (session := await accept_session(reader, writer, KEY, self.limit)) is not None:
                while (message := await read_message(reader, session)) is not None:
                    await write_message(writer, session, message)
        writer.close()


class PlainClient:
    """The unauthenticated protocol's blocking client, as the trainer had it."""

    def __init__(self, port: int) -> None:
        self.socket = socket.create_connection(("127.0.0.1", port))
        self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def request(self, message: Message) -> Message:
        self.socket.sendall(PLAIN.pack(len(payload := encode(message))) + payload)
        (length,) = PLAIN.unpack(self._read(PLAIN.size))
        return decode(self._read(length))

    def _read(self, size: int) -> bytes:
        chunks, remaining = [], size
        while remaining:
            chunk = self.socket.recv(min(remaining, 1 << 20))
            if not chunk:
                raise ConnectionError("the echo server closed the connection")
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)


def median_ms(run: Callable[[], object], repetitions: int, other: Callable[[], object]) -> tuple[float, float]:
    """Median ms of `run` and of `other` over `repetitions` interleaved runs, alternating which goes first."""
    times: tuple[list[float], list[float]] = ([], [])
    for repetition in range(repetitions):
        order = ((0, run), (1, other)) if repetition % 2 == 0 else ((1, other), (0, run))
        for index, function in order:
            started = time.perf_counter()
            function()
            times[index].append((time.perf_counter() - started) * 1000)
    return statistics.median(times[0]), statistics.median(times[1])


def report(what: str, megabytes: float, authenticated: float, plain: float) -> None:
    print(
        f"  {what:8} {megabytes:5g} MB: authenticated {authenticated:8.2f} ms, plain {plain:8.2f} ms, "
        f"ratio {authenticated / plain:.2f}"
    )


def bench(megabytes: float, repetitions: int) -> None:
    """Both measurements for one message size."""
    message = shard_message(megabytes)
    limit = frame_limit(message["grads"])
    auth, plain = median_ms(lambda: codec_authenticated(message, limit), repetitions, lambda: codec_plain(message))
    report("codec", megabytes, auth, plain)
    servers = EchoServer(True, limit), EchoServer(False, limit)
    client = Connection("127.0.0.1", servers[0].port, KEY, limit, timeout=60)
    baseline = PlainClient(servers[1].port)
    auth, plain = median_ms(lambda: client.request(message), repetitions, lambda: baseline.request(message))
    report("loopback", megabytes, auth, plain)
    client.close()
    baseline.socket.close()


def main() -> None:
    """Every size, both ways."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repetitions", type=int, default=11)
    parser.add_argument("--sizes-mb", type=float, nargs="+", default=[1.0, 50.0])
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"parameter-server round trip (request and reply of the same size), median of {args.repetitions}")
    for megabytes in args.sizes_mb:
        bench(megabytes, args.repetitions)
    print(f"(HMAC-SHA256 header {HEADER.size} bytes per frame; ratio = authenticated / plain)")


if __name__ == "__main__":
    main()
