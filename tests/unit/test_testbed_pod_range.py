"""Each kwok cluster on this machine claims a loopback range of its own (testbed/pod_range.py), so that tests of two
clusters (one per xdist worker) never serve a pod's port on the same address."""

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from testbed.pod_range import CLAIM_NAME, PodRange

pytestmark = pytest.mark.fast
REPO = Path(__file__).resolve().parents[2]


def test_clusters_at_once_get_ranges_of_their_own_and_a_released_one_is_free_again() -> None:
    first, second = PodRange(), PodRange()
    try:
        assert first.octet != second.octet and first.cidr != second.cidr
        assert first.cidr == f"127.{first.octet}.0.0/16"
        first.release()
        third = PodRange()
        assert third.octet == first.octet
        third.release()
    finally:
        first.release()
        second.release()


def test_a_claim_goes_with_the_process_that_held_it() -> None:
    script = "from testbed.pod_range import PodRange; r = PodRange(); print(r.octet, flush=True); input()"
    held = subprocess.Popen(
        [sys.executable, "-c", script], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert held.stdout is not None and held.stdin is not None
    octet = int(held.stdout.readline())
    mine = PodRange()
    try:
        assert mine.octet != octet
    finally:
        mine.release()
    held.kill()
    held.wait(timeout=30)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as claim:
        claim.bind(CLAIM_NAME.format(octet))  # free again: the kernel let it go with its process
