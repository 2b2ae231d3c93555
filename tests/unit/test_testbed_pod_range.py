"""Each kwok cluster on this machine claims a loopback range of its own (testbed/pod_range.py), so that tests of two
clusters (one per xdist worker) never serve a pod's port on the same address. The tests claim under names of their
own: a cluster starting on another worker meanwhile never takes the range they check."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from testbed.pod_range import PodRange

pytestmark = pytest.mark.fast
REPO = Path(__file__).resolve().parents[2]
SUFFIX = f"trainingjob-pod-range-test-{os.getpid()}-{{}}"  # an argument cannot hold the abstract name's NUL
NAME = "\0" + SUFFIX


def test_clusters_at_once_get_ranges_of_their_own_and_a_released_one_is_free_again() -> None:
    first, second = PodRange(NAME), PodRange(NAME)
    try:
        assert first.octet != second.octet and first.cidr != second.cidr
        assert first.cidr == f"127.{first.octet}.0.0/16"
        first.release()
        third = PodRange(NAME)
        assert third.octet == first.octet
        third.release()
    finally:
        first.release()
        second.release()


def test_a_claim_goes_with_the_process_that_held_it() -> None:
    script = (  # holds its claim (r) until its stdin closes or it is killed
        "import sys; from testbed.pod_range import PodRange; r = PodRange('\\0' + sys.argv[1]); print(r.octet); input()"
    )
    held = subprocess.Popen(
        [sys.executable, "-c", script, SUFFIX], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert held.stdout is not None and held.stdin is not None
    octet = int(held.stdout.readline())
    mine = PodRange(NAME)
    try:
        assert mine.octet != octet
    finally:
        mine.release()
    held.kill()
    held.wait(timeout=30)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as claim:
        claim.bind(NAME.format(octet))  # free again: the kernel let it go with its process
