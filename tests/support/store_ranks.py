"""What each rank of the signed-store test runs (a module of its own, so that spawned processes can import it): join
a two-rank gloo group the way the trainer does (trainer.ddp.init_process_group: rank 0's TCPStore, signed with the
pod's job key), all-reduce once, and write the sum, or the error that stopped the rendezvous, to a JSON file."""

import gc
import json
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import TCPStore

from trainer.ddp import init_process_group
from trainer.env import read_env


def run(rank: int, port: int, key_file: str, folder: str) -> None:
    variables = {
        "NODE_RANK": str(rank),
        "WORLD_SIZE": "2",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "TJ_MASTER_WAIT_SECONDS": "20",
        "TJ_ATTEMPT": "3",
        "TJ_JOB_KEY_FILE": key_file,
    }
    result: dict[str, object]
    try:
        init_process_group(read_env(variables))
    except (RuntimeError, TimeoutError) as error:
        result = {"error": str(error)}
    else:
        total = torch.tensor([float(rank + 1)])
        dist.all_reduce(total)
        result = {"sum": total.item()}
        dist.destroy_process_group()
    (Path(folder) / f"rank-{rank}.json").write_text(json.dumps(result))


def serves_after_init(port: int, key_file: str, folder: str) -> None:
    """Rank 0 of one joins as the trainer does, then a stranger's client reaches its TCPStore: the server must live
    as long as the process group (the group holds a store written in Python only through its C++ part)."""
    variables = {"WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "TJ_JOB_KEY_FILE": key_file}
    init_process_group(read_env(variables))
    gc.collect()
    result: dict[str, object]
    try:
        client = TCPStore("127.0.0.1", port, 1, is_master=False, timeout=timedelta(seconds=5))
        client.set("probe", "here")
        result = {"served": client.get("probe").decode()}
    except (RuntimeError, TimeoutError) as error:
        result = {"error": str(error)}
    dist.destroy_process_group()
    (Path(folder) / "rank-0.json").write_text(json.dumps(result))
