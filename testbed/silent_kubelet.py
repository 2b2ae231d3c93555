"""A Node whose kubelet serves every pod's log as one line, then nothing (follow streams stay open and idle), and
a job's pod as the operator would label it, which no kubelet ever runs."""

import socket
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kubernetes import client

from testbed.controlplane import ControlPlane
from testbed.processes import Server, free_port
from trainingjob.children.naming import ATTEMPT_LABEL, INDEX_LABEL, JOB_LABEL, ROLE_LABEL

READY_TIMEOUT = 30.0

# A kubelet's log endpoint and nothing more: every request gets 200 and one line, then silence until the apiserver
# hangs up. Without --kubelet-certificate-authority the apiserver does not verify a kubelet's serving certificate.
SILENT_KUBELET = """
import asyncio, ssl, sys

async def answer(reader, writer):
    await reader.readuntil(b"\\r\\n\\r\\n")
    writer.write(b"HTTP/1.1 200 OK\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n8\\r\\nstarted\\n\\r\\n")
    await writer.drain()
    await reader.read()

async def main(port, cert, key):
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    await (await asyncio.start_server(answer, "127.0.0.1", int(port), ssl=tls, backlog=1024)).serve_forever()

asyncio.run(main(*sys.argv[1:]))
"""


def _accepts(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=1):
        return True


@contextmanager
def silent_node(plane: ControlPlane, admin: client.ApiClient, folder: Path) -> Iterator[str]:
    """A Node (its name yielded) whose kubelet, a process logging into `folder`, is the silent one above; the Node
    is deleted and the kubelet stopped at the end."""
    pair, port = plane.pki.issue("kubelet", "kubelet", server=True), free_port()
    kubelet = Server(
        "kubelet", [sys.executable, "-c", SILENT_KUBELET, str(port), str(pair.cert), str(pair.key)], folder
    )
    node, nodes = f"silent-{uuid.uuid4().hex[:6]}", client.CoreV1Api(admin)
    status = {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
              "daemonEndpoints": {"kubeletEndpoint": {"Port": port}}}  # fmt: skip
    try:
        kubelet.wait_ready(lambda: _accepts(port), READY_TIMEOUT)
        nodes.create_node({"metadata": {"name": node}, "status": status})
        try:
            yield node
        finally:
            nodes.delete_node(node)
    finally:
        kubelet.stop()


def pod_of(job: str, attempt: int, node: str | None = None) -> client.V1Pod:
    """Worker 0's pod of `attempt`, as the operator would label it; no kubelet ever runs it."""
    labels = {JOB_LABEL: job, ROLE_LABEL: "worker", INDEX_LABEL: "0", ATTEMPT_LABEL: str(attempt)}
    container = client.V1Container(name="trainer", image="trainer:dev")
    spec = client.V1PodSpec(containers=[container], node_name=node, automount_service_account_token=False)
    return client.V1Pod(metadata=client.V1ObjectMeta(name=f"{job}-worker-0-{attempt}", labels=labels), spec=spec)
