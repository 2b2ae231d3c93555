"""What each rank of the collectives test runs (a module of its own, so that spawned processes can import it): join a
two-rank gloo group on a FileStore, exchange bytes, and write what it received (or what it refused) to a JSON file."""

import json
import pickle
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import FileStore

from trainer.collectives import all_gather_bytes, all_gather_json, broadcast_bytes, from_bytes, to_bytes


class Planted:
    """Unpickled, it touches a file: what a peer could make every rank do through an object collective."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.marker,))


def run(rank: int, folder: str) -> None:
    root = Path(folder)
    dist.init_process_group("gloo", store=FileStore(str(root / "store"), 2), rank=rank, world_size=2)
    try:
        device = torch.device("cpu")
        state = {"model": {"w": torch.arange(6.0).reshape(2, 3)}, "step": 7} if rank == 0 else None
        shared = from_bytes(broadcast_bytes(to_bytes(state) if rank == 0 else b"", device))
        empty = broadcast_bytes(b"", device)
        metrics = all_gather_json([{"loss": 0.5 * (rank + 1)}, 10 + rank], device)
        planted = pickle.dumps(Planted(root / "planted")) if rank == 1 else to_bytes({"rng": torch.ones(2)})
        parts = all_gather_bytes(planted, device)
        refused = []
        for part in parts:
            try:
                from_bytes(part)
            except pickle.UnpicklingError as error:
                refused.append(type(error).__name__)
        result = {
            "weights": shared["model"]["w"].tolist(),
            "step": shared["step"],
            "empty": empty.decode(),
            "metrics": metrics,
            "sizes": [len(p) for p in parts],
            "refused": refused,
        }
        (root / f"rank-{rank}.json").write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()
