"""Ranks share bytes over tensors (trainer/collectives.py), with real gloo processes: rank 0's state reaches the
other rank whole, every rank's JSON reaches every rank in order, bytes of different lengths come back exact, and a
peer's pickle that would run code (touch a file) is refused as data, never run."""

import json
import multiprocessing
from pathlib import Path

import pytest
from tests.support import collective_ranks

pytestmark = pytest.mark.trainer
RUN_TIMEOUT = 120.0


def test_ranks_share_data_and_a_planted_pickle_runs_nowhere(tmp_path: Path) -> None:
    spawn = multiprocessing.get_context("spawn")
    ranks = [spawn.Process(target=collective_ranks.run, args=(rank, str(tmp_path))) for rank in range(2)]
    for rank in ranks:
        rank.start()
    for rank in ranks:
        rank.join(RUN_TIMEOUT)
    assert [rank.exitcode for rank in ranks] == [0, 0]
    results = [json.loads((tmp_path / f"rank-{rank}.json").read_text()) for rank in range(2)]
    for result in results:
        assert result["weights"] == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]] and result["step"] == 7
        assert result["empty"] == ""
        assert result["metrics"] == [[{"loss": 0.5}, 10], [{"loss": 1.0}, 11]]
        assert result["sizes"][0] != result["sizes"][1]  # lengths differ: the padding was cut off
        assert result["refused"] == ["UnpicklingError"]  # rank 1's part, on every rank
    assert not (tmp_path / "planted").exists()
