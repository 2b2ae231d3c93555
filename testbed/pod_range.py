"""A loopback range of its own for each kwok cluster on this machine: 127.N.0.0/16, N claimed while the cluster runs.

kwok hands out pod addresses in order from its range, so two clusters with the same range (one per xdist worker)
give their first pods the same addresses. Tests serve a pod's ports on its address (a rank's progress endpoint, its
agent), so two tests on two workers would both bind 127.1.0.5:PROGRESS_PORT and one fail with EADDRINUSE. A claim is
an abstract Unix socket bound under a name per N: the kernel refuses a second bind, and lets the name go when the
socket is closed or its process dies, so a claim never outlives its cluster and leaves nothing on disk.
"""

import socket

FIRST, LAST = 1, 254  # 127.0.0.0/16 is left to servers and the fake nodes' own addresses
CLAIM_NAME = "\0trainingjob-pod-range-{}"


class PodRange:
    """The first free 127.N.0.0/16, held until release(). `claim_name`: the claims' names (tests use their own, so
    that clusters starting meanwhile never take what they check)."""

    def __init__(self, claim_name: str = CLAIM_NAME) -> None:
        for octet in range(FIRST, LAST + 1):
            claim = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                claim.bind(claim_name.format(octet))
            except OSError:
                claim.close()
                continue
            self.octet, self._claim = octet, claim
            return
        raise RuntimeError(f"every loopback range 127.{FIRST}-{LAST}.0.0/16 is claimed by another cluster")

    @property
    def cidr(self) -> str:
        return f"127.{self.octet}.0.0/16"

    def release(self) -> None:
        self._claim.close()
