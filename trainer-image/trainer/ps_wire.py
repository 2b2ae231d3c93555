"""Parameter-server messages: a torch.save'd dict of tensors and scalars, in authenticated frames (ps_auth)."""

import asyncio
import io
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from trainer.ps_auth import HEADER, NONCE_BYTES, Session, new_nonce

FIXED_OVERHEAD = 64 << 10
PER_TENSOR_OVERHEAD = 1 << 10

Message = dict[str, Any]


class ProtocolError(ValueError):
    """An authenticated peer sent something the protocol does not allow."""


def frame_limit(tensors: Mapping[str, torch.Tensor]) -> int:
    """The largest payload a message carrying these tensors (or tensors like them) needs, with its other fields."""
    sizes = (t.numel() * t.element_size() + len(name.encode()) + PER_TENSOR_OVERHEAD for name, t in tensors.items())
    return sum(sizes) + FIXED_OVERHEAD


def encode(message: Message) -> bytes:
    """One message's payload."""
    buffer = io.BytesIO()
    torch.save(message, buffer)
    return buffer.getvalue()


def decode(payload: bytes | bytearray) -> Message:
    """Parse one authenticated payload; only tensors and plain data are accepted (weights_only)."""
    try:
        message = torch.load(io.BytesIO(payload), weights_only=True)
    except Exception as error:
        raise ProtocolError(f"undecodable message: {error}") from None
    if not isinstance(message, dict) or not isinstance(message.get("op"), str):
        raise ProtocolError("a message must be a dict with a string 'op'")
    return message


async def accept_session(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, job_key: bytes, limit: int
) -> Session | None:
    """The server's side of the nonce exchange; None when the peer left without a word (a port probe)."""
    try:
        client_nonce = await reader.readexactly(NONCE_BYTES)
    except asyncio.IncompleteReadError as error:
        if error.partial:
            raise ConnectionError("connection closed inside the nonce") from None
        return None
    server_nonce = new_nonce()
    writer.write(server_nonce)
    return Session.start(job_key, server_nonce, client_nonce, server=True, limit=limit)


async def read_message(reader: asyncio.StreamReader, session: Session) -> Message | None:
    """The next authenticated message, or None when the peer closed the connection between messages."""
    try:
        header = await reader.readexactly(HEADER.size)
    except asyncio.IncompleteReadError as error:
        if error.partial:
            raise ConnectionError("connection closed inside a frame header") from None
        return None
    length = session.open_header(header)
    try:
        payload = await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        raise ConnectionError("connection closed inside a frame") from None
    return decode(session.open_body(payload))


async def write_message(writer: asyncio.StreamWriter, session: Session, message: Message) -> None:
    """Send one authenticated message."""
    payload = encode(message)
    writer.writelines((session.seal(payload), payload))
    await writer.drain()


class Connection:
    """A blocking, authenticated client connection; every call has a timeout, so a dead peer never hangs it."""

    def __init__(self, host: str, port: int, job_key: bytes, limit: int, timeout: float) -> None:
        self.address = f"{host}:{port}"
        self.timeout = timeout
        self._socket = socket.create_connection((host, port), timeout=timeout)
        try:
            self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            client_nonce = new_nonce()
            self._socket.sendall(client_nonce)
            server_nonce = bytes(self._read_exactly(NONCE_BYTES))
        except BaseException:
            self._socket.close()
            raise
        self._session = Session.start(job_key, server_nonce, client_nonce, server=False, limit=limit)

    def send(self, message: Message) -> None:
        """Send one message."""
        payload = encode(message)
        self._socket.sendall(self._session.seal(payload))
        self._socket.sendall(payload)

    def receive(self, timeout: float | None = None) -> Message:
        """Wait (at most `timeout`, default the connection's) for one authenticated message."""
        self._socket.settimeout(timeout or self.timeout)
        length = self._session.open_header(self._read_exactly(HEADER.size))
        return decode(self._session.open_body(self._read_exactly(length)))

    def request(self, message: Message, timeout: float | None = None) -> Message:
        """Send, then wait for the reply."""
        self.send(message)
        return self.receive(timeout)

    def _read_exactly(self, size: int) -> bytearray:
        buffer = bytearray(size)
        view, received = memoryview(buffer), 0
        while received < size:
            count = self._socket.recv_into(view[received:], min(size - received, 1 << 20))
            if not count:
                raise ConnectionError(f"{self.address} closed the connection")
            received += count
        return buffer

    def close(self) -> None:
        """Close the socket."""
        self._socket.close()


def integer_field(message: Message, name: str, low: int = 0, high: int | None = None) -> int:
    """message[name] as an integer in [low, high]; a ProtocolError naming it otherwise."""
    value = message.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProtocolError(f"{name!r} must be an integer, got {type(value).__name__}")
    if value < low or (high is not None and value > high):
        raise ProtocolError(f"{name!r} must be in [{low}, {high}]")
    return value


@dataclass
class Peer:
    """One connection: who is at the other end, and which worker its authenticated hello said it speaks for."""

    address: str
    worker: int | None = None
    authenticated: bool = False  # its first message carried the job's key
    incarnation: Any = None  # which run of the worker its hello said it is (trainer.ps_fence)


def peer_address(writer: asyncio.StreamWriter) -> str:
    """host:port of the other end of a connection."""
    peer = writer.get_extra_info("peername")
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
