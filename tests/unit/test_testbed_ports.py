"""testbed.processes.free_port: a port outside the kernel's ephemeral range (which anything on the machine may be
handed meanwhile), handed out once by this process and to no other test process while it lives."""

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from testbed.processes import PORT_CLAIM, PORTS, free_port

pytestmark = pytest.mark.fast
REPO = Path(__file__).resolve().parents[2]


def test_ports_are_outside_the_ephemeral_range_bindable_and_never_handed_twice() -> None:
    low, high = (int(bound) for bound in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    ports = [free_port() for _ in range(20)]
    assert len(set(ports)) == len(ports)
    assert all(port in PORTS for port in ports)
    if not (low <= PORTS.start and PORTS.stop - 1 <= high):  # a machine whose ephemeral range covers PORTS: claims only
        assert not any(low <= port <= high for port in ports)
    with socket.create_server(("127.0.0.1", ports[0])):
        pass


def test_another_process_never_gets_a_port_this_one_handed_out() -> None:
    mine = {free_port() for _ in range(5)}
    script = "from testbed.processes import free_port; print(*(free_port() for _ in range(50)))"
    theirs = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    assert mine.isdisjoint(int(port) for port in theirs)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as claim, pytest.raises(OSError, match="in use"):
        claim.bind(PORT_CLAIM.format(next(iter(mine))))  # still claimed by this process
