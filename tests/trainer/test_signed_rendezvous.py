"""DDP's rendezvous with signed store values (trainer/signed_store.py), with real gloo processes joining as the
trainer does: two ranks holding the job key meet and all-reduce; a rank holding another key (a stranger posing as
rank 1) is refused by the honest rank, which names the value it would not take, instead of connecting to it."""

import json
import multiprocessing
from pathlib import Path

import pytest
from testbed.processes import free_port
from tests.support import store_ranks

pytestmark = pytest.mark.trainer
RUN_TIMEOUT = 120.0


def _rendezvous(tmp_path: Path, keys: tuple[bytes, bytes]) -> list[dict[str, object]]:
    port, spawn = free_port(), multiprocessing.get_context("spawn")
    ranks = []
    for rank, key in enumerate(keys):
        key_file = tmp_path / f"key-{rank}"
        key_file.write_bytes(key)
        ranks.append(spawn.Process(target=store_ranks.run, args=(rank, port, str(key_file), str(tmp_path))))
    for process in ranks:
        process.start()
    for process in ranks:
        process.join(RUN_TIMEOUT)
    assert [process.exitcode for process in ranks] == [0, 0]
    return [json.loads((tmp_path / f"rank-{rank}.json").read_text()) for rank in range(2)]


def test_ranks_with_the_job_key_meet_and_reduce(tmp_path: Path) -> None:
    assert _rendezvous(tmp_path, (b"j" * 32, b"j" * 32)) == [{"sum": 3.0}, {"sum": 3.0}]


def test_a_rank_with_another_key_is_refused_by_name(tmp_path: Path) -> None:
    results = _rendezvous(tmp_path, (b"j" * 32, b"s" * 32))
    assert all("error" in result for result in results), results
    assert any("is not signed with the job key" in str(result["error"]) for result in results), results


def test_rank_0s_store_serves_as_long_as_its_process_group(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_bytes(b"j" * 32)
    process = multiprocessing.get_context("spawn").Process(
        target=store_ranks.serves_after_init, args=(free_port(), str(key_file), str(tmp_path))
    )
    process.start()
    process.join(RUN_TIMEOUT)
    assert process.exitcode == 0
    assert json.loads((tmp_path / "rank-0.json").read_text()) == {"served": "here"}
