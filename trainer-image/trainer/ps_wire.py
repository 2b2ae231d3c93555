"""Parameter-server messages: an 8-byte length, then a torch.save'd dict of tensors and scalars."""

import asyncio
import io
import socket
import struct
from typing import Any

import torch

HEADER = struct.Struct("!Q")
MAX_MESSAGE_BYTES = 1 << 31

Message = dict[str, Any]


def encode(message: Message) -> bytes:
    """Frame one message."""
    buffer = io.BytesIO()
    torch.save(message, buffer)
    payload = buffer.getvalue()
    return HEADER.pack(len(payload)) + payload


def decode(payload: bytes) -> Message:
    """Parse one message body; only tensors and plain data are accepted (weights_only)."""
    message = torch.load(io.BytesIO(payload), weights_only=True)
    if not isinstance(message, dict) or "op" not in message:
        raise ValueError("a message must be a dict with an 'op'")
    return message


def _check_length(length: int) -> int:
    if length > MAX_MESSAGE_BYTES:
        raise ValueError(f"message of {length} bytes is over the {MAX_MESSAGE_BYTES}-byte limit")
    return length


async def read_message(reader: asyncio.StreamReader) -> Message | None:
    """The next message, or None when the peer closed the connection between messages."""
    try:
        header = await reader.readexactly(HEADER.size)
    except asyncio.IncompleteReadError as error:
        if error.partial:
            raise ConnectionError("connection closed inside a message header") from None
        return None
    (length,) = HEADER.unpack(header)
    return decode(await reader.readexactly(_check_length(length)))


class Connection:
    """A blocking client connection; every call has a timeout, so a dead peer never hangs the caller."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.address = f"{host}:{port}"
        self.timeout = timeout
        self._socket = socket.create_connection((host, port), timeout=timeout)
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self, message: Message) -> None:
        """Send one message."""
        self._socket.sendall(encode(message))

    def receive(self, timeout: float | None = None) -> Message:
        """Wait (at most `timeout`, default the connection's) for one message."""
        self._socket.settimeout(timeout or self.timeout)
        (length,) = HEADER.unpack(self._read_exactly(HEADER.size))
        return decode(self._read_exactly(_check_length(length)))

    def request(self, message: Message, timeout: float | None = None) -> Message:
        """Send, then wait for the reply."""
        self.send(message)
        return self.receive(timeout)

    def _read_exactly(self, size: int) -> bytes:
        chunks, remaining = [], size
        while remaining:
            chunk = self._socket.recv(min(remaining, 1 << 20))
            if not chunk:
                raise ConnectionError(f"{self.address} closed the connection")
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        """Close the socket."""
        self._socket.close()
