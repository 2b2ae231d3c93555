"""Collectives of bytes over tensors. What ranks share besides gradients (the state rank 0 resumed from, every rank's
RNG state, the evaluation sums) travels as uint8 tensors and is read back as data: JSON, or torch.load with
weights_only=True (tensors, numbers, strings, lists and dicts; no class is built, no code runs). torch's object
collectives (broadcast_object_list, all_gather_object) unpickle what a peer sends, so whoever could speak on the
job's rendezvous port could run code in every rank; these cannot."""

import io
import json
from typing import Any

import torch
import torch.distributed as dist


def to_bytes(value: Any) -> bytes:
    """`value` (tensors and plain data) as torch.save writes it."""
    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()


def from_bytes(data: bytes) -> Any:
    """What to_bytes wrote, read as data only: anything but tensors and plain data is refused."""
    return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)


def _tensor(data: bytes, device: torch.device) -> torch.Tensor:
    return (
        torch.frombuffer(bytearray(data), dtype=torch.uint8).to(device) if data else torch.empty(0, dtype=torch.uint8)
    )


def broadcast_bytes(data: bytes, device: torch.device) -> bytes:
    """Rank 0's `data` on every rank (the others' `data` is ignored)."""
    size = torch.tensor([len(data)], dtype=torch.int64, device=device)
    dist.broadcast(size, src=0)
    count = int(size.item())
    if count == 0:
        return b""
    buffer = _tensor(data, device) if dist.get_rank() == 0 else torch.empty(count, dtype=torch.uint8, device=device)
    dist.broadcast(buffer, src=0)
    return bytes(buffer.cpu().numpy().tobytes())


def all_gather_bytes(data: bytes, device: torch.device) -> list[bytes]:
    """Every rank's `data`, in rank order, on every rank."""
    world = dist.get_world_size()
    sizes = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(world)]
    dist.all_gather(sizes, torch.tensor([len(data)], dtype=torch.int64, device=device))
    counts = [int(s.item()) for s in sizes]
    longest = max(counts)
    if longest == 0:
        return [b""] * world
    padded = torch.zeros(longest, dtype=torch.uint8, device=device)
    padded[: len(data)] = _tensor(data, device)
    parts = [torch.empty(longest, dtype=torch.uint8, device=device) for _ in range(world)]
    dist.all_gather(parts, padded)
    return [bytes(part[:count].cpu().numpy().tobytes()) for part, count in zip(parts, counts, strict=True)]


def all_gather_json(value: Any, device: torch.device) -> list[Any]:
    """Every rank's JSON-able `value`, in rank order, on every rank."""
    return [json.loads(part) for part in all_gather_bytes(json.dumps(value).encode(), device)]
