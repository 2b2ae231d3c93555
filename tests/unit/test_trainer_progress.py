"""Rank 0's progress: the Prometheus text, the HTTP endpoint and the atomically written file."""

import json
import socket
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from testbed.processes import free_port, poll_until

from trainer.bounded_http import BoundedHandler
from trainer.contract import LISTEN_ADDRESS
from trainer.progress_endpoint import (
    MAX_CONNECTIONS,
    TERMINATION_MESSAGE_BYTES,
    ProgressReporter,
    final_report,
    render_metrics,
)
from trainingjob.children.progress_report import parse_report

pytestmark = pytest.mark.fast


def test_metrics_text_format() -> None:
    text = render_metrics({"step": 3, "loss": 0.5, "finished": True, "lastCheckpointPath": "/x"})
    assert "# TYPE trainingjob_trainer_step gauge\ntrainingjob_trainer_step 3.0\n" in text
    assert "trainingjob_trainer_loss 0.5\n" in text
    assert "finished" not in text and "/x" not in text


def test_endpoint_and_file(tmp_path: Path) -> None:
    port = free_port()
    now = [100.0]
    reporter = ProgressReporter(2, port, tmp_path / "progress.json", clock=lambda: now[0]).start()
    try:
        reporter.report(step=1, loss=2.0, samples=64)
        now[0] = 102.0
        reporter.report(step=2, loss=1.5, samples=64)
        reporter.checkpointed(2, "/ckpt/step-2", 101.0)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/progress", timeout=5) as response:
            progress = json.load(response)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            metrics = response.read().decode()
    finally:
        reporter.close()
    assert (progress["step"], progress["attempt"], progress["heartbeat"]) == (2, 2, 102.0)
    assert progress["samplesPerSecond"] == 32.0 and progress["lastCheckpointStep"] == 2
    assert "trainingjob_trainer_last_checkpoint_step 2.0" in metrics
    assert json.loads((tmp_path / "progress.json").read_text())["lastCheckpointPath"] == "/ckpt/step-2"


def test_close_leaves_the_last_progress_as_the_termination_message(tmp_path: Path) -> None:
    message = tmp_path / "termination-log"
    message.touch()  # the kubelet makes the file; the trainer only fills it
    now = [150.0]
    reporter = ProgressReporter(3, None, None, clock=lambda: now[0], termination_message=message).start()
    reporter.report(step=499, loss=0.5, samples=64)
    now[0] = 200.0
    reporter.report(step=500, loss=0.25, samples=64)
    reporter.checkpointed(500, "/checkpoints/job/uid/step-500", 199.0, stalled=2.25)
    reporter.close()
    progress, checkpoint = parse_report(message.read_bytes())  # as the operator reads it from the pod status
    assert progress is not None and (progress.step, progress.loss, progress.attempt) == (500, 0.25, 3)
    assert progress.first_step_time is not None and progress.first_step_time.timestamp() == 150.0  # the first step's
    assert progress.checkpoint_stall_seconds == 2.25
    assert checkpoint is not None and (checkpoint.step, checkpoint.path) == (500, "/checkpoints/job/uid/step-500")


def test_close_makes_no_termination_message_outside_a_container(tmp_path: Path) -> None:
    reporter = ProgressReporter(1, None, None, termination_message=tmp_path / "termination-log").start()
    reporter.close()
    assert not (tmp_path / "termination-log").exists()


def test_a_final_report_fits_what_kubernetes_keeps() -> None:
    huge_path = "/checkpoints/" + "x" * 5000
    body = final_report({"attempt": 1, "step": 9, "lastCheckpointStep": 9, "lastCheckpointPath": huge_path})
    assert len(body.encode()) <= TERMINATION_MESSAGE_BYTES
    assert json.loads(body) == {"attempt": 1, "step": 9}  # the checkpoint dropped whole, never cut


def get_status(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/progress", timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


def test_idle_clients_hold_at_most_max_connections_and_the_next_is_told_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(BoundedHandler, "timeout", 120.0)  # the idle clients stay for the whole test
    port = free_port()
    reporter = ProgressReporter(1, port, None).start()
    try:
        idle = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(MAX_CONNECTIONS)]
        assert get_status(port) == 503  # accepted after the idle ones, each of which holds a request slot
        for sock in idle:
            sock.close()
        poll_until(lambda: get_status(port) == 200, timeout=30, interval=0.05, what="a slot back once they left")
    finally:
        reporter.close()


def test_an_idle_client_is_dropped_after_the_request_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(BoundedHandler, "timeout", 0.2)
    port = free_port()
    reporter = ProgressReporter(1, port, None).start()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as idle:
            assert idle.recv(1) == b""  # the server closed it (a thread per idle client, kept forever, before)
    finally:
        reporter.close()


@pytest.mark.parametrize(
    ("listen", "bound"), [(None, "0.0.0.0"), ("127.0.0.1", "127.0.0.1")], ids=["pod-every-interface", "local-loopback"]
)
def test_the_endpoint_listens_where_told(monkeypatch: pytest.MonkeyPatch, listen: str | None, bound: str) -> None:
    """Local mode (TJ_LISTEN_ADDRESS=127.0.0.1) keeps a run's ports off the machine's other interfaces."""
    if listen is None:
        monkeypatch.delenv(LISTEN_ADDRESS, raising=False)
    else:
        monkeypatch.setenv(LISTEN_ADDRESS, listen)
    reporter = ProgressReporter(1, free_port(), None).start()
    try:
        assert reporter._server is not None and reporter._server.server_address[0] == bound
    finally:
        reporter.close()
