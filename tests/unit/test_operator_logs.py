"""The operator's logs: one line per decision naming the job and the attempt, as text or as JSON fields."""

import json
import logging

import pytest
from tests.support.builders import SETTINGS, T0, job_manifest
from tests.support.fake_cluster import FakeCluster

from trainingjob.__main__ import JsonFormatter
from trainingjob.reconcile.job import reconcile

pytestmark = pytest.mark.fast


def test_each_decision_is_one_line_naming_the_job_and_its_attempt(caplog: pytest.LogCaptureFixture) -> None:
    cluster = FakeCluster(clock=lambda: T0)
    cluster.submit(job_manifest("bert", namespace="team-a"))
    with caplog.at_level(logging.INFO, logger="trainingjob.reconcile.job"):
        reconcile(cluster, "team-a", "bert", now=T0, settings=SETTINGS)
        for key in list(cluster.pods):
            cluster.finish(*key, 137, "OOMKilled")
        reconcile(cluster, "team-a", "bert", now=T0, settings=SETTINGS)
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "team-a/bert attempt 1: JobCreated: Creating the pods of attempt 1."
    assert lines[1].startswith("team-a/bert attempt 2: OOMKilled: pod bert-worker-0-1 exited with code 137 (OOMKilled)")
    record = caplog.records[1]
    entry = json.loads(JsonFormatter().format(record))
    assert (entry["job"], entry["attempt"], entry["decision"], entry["level"]) == (
        "team-a/bert",
        2,
        "OOMKilled",
        "WARNING",
    )
