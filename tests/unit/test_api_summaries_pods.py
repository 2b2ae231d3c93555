"""The pods of a job as the dashboard lists them: slots from the operator's labels, state from the trainer's
container, newest attempt first; pods whose fields are missing or odd still list."""

from typing import Any

import pytest

from trainingjob.children.naming import ATTEMPT_LABEL, INDEX_LABEL, ROLE_LABEL
from trainingjob_api.dashboard_schemas import JobPodList
from trainingjob_api.job_pods import pod_row, pod_rows

pytestmark = pytest.mark.fast

Pod = dict[str, Any]


def pod(name: str, role: str = "worker", index: str = "0", attempt: str = "1", **status: Any) -> Pod:
    labels = {ROLE_LABEL: role, INDEX_LABEL: index, ATTEMPT_LABEL: attempt}
    meta = {"name": name, "labels": labels, "creationTimestamp": "2026-01-01T00:00:00Z"}
    return {"metadata": meta, "spec": {"nodeName": "node-1"}, "status": status}


def trainer(state: Pod, restarts: int = 0, last: Pod | None = None, name: str = "trainer") -> Pod:
    return {"name": name, "state": state, "restartCount": restarts, "lastState": last or {}}


RUNNING = {
    "phase": "Running",
    "startTime": "2026-01-01T00:00:05Z",
    "conditions": [{"type": "Ready", "status": "True"}],
    "containerStatuses": [trainer({"running": {"startedAt": "2026-01-01T00:00:06Z"}})],
}
OOM = {
    "phase": "Failed",
    "containerStatuses": [
        trainer({"running": {}}, name="log-shipper"),
        trainer({"terminated": {"exitCode": 137, "reason": "OOMKilled", "finishedAt": "2026-01-01T00:10:00Z"}}),
    ],
}
EVICTED = {"phase": "Failed", "reason": "Evicted", "conditions": [{"type": "Ready", "status": "False"}]}
CRASHLOOP = {
    "phase": "Running",
    "containerStatuses": [
        trainer({"waiting": {"reason": "CrashLoopBackOff"}}, restarts=3, last={"terminated": {"exitCode": 1}})
    ],
}


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (RUNNING, {"phase": "Running", "ready": True, "started": "2026-01-01T00:00:05Z", "reason": None,
                   "exitCode": None, "finished": None, "restarts": 0}),
        (OOM, {"phase": "Failed", "ready": False, "reason": "OOMKilled", "exitCode": 137,
               "finished": "2026-01-01T00:10:00Z"}),
        (EVICTED, {"phase": "Failed", "ready": False, "reason": "Evicted", "exitCode": None}),
        (CRASHLOOP, {"reason": "CrashLoopBackOff", "exitCode": 1, "restarts": 3}),
        ({}, {"phase": None, "ready": False, "reason": None, "restarts": 0}),
        ({"containerStatuses": "x", "conditions": [None, 3]}, {"phase": None, "ready": False}),
    ],
    ids=["running", "oom-killed", "evicted", "crash-loop", "no-status", "odd-status"],
)  # fmt: skip
def test_a_pods_state(status: Pod, expected: dict[str, Any]) -> None:
    row = pod_row(pod("job-worker-0-1", **status))
    assert (row["name"], row["role"], row["index"], row["attempt"], row["node"]) == ("job-worker-0-1", "worker", 0,
                                                                                    1, "node-1")  # fmt: skip
    assert {k: row[k] for k in expected} == expected


def test_pods_newest_attempt_first_then_role_and_index() -> None:
    pods = [
        pod("job-worker-1-1", index="1", attempt="1"),
        pod("job-worker-0-2", attempt="2"),
        pod("job-ps-0-2", role="ps", attempt="2"),
        pod("job-worker-10-2", index="10", attempt="2"),
        pod("job-worker-2-2", index="2", attempt="2"),
        pod("stray", role="", index="x", attempt="-1"),
        "not a pod",
    ]
    rows = pod_rows(pods)
    assert [r["name"] for r in rows] == [
        "job-ps-0-2", "job-worker-0-2", "job-worker-2-2", "job-worker-10-2", "job-worker-1-1", "stray",
    ]  # fmt: skip
    assert (rows[-1]["index"], rows[-1]["attempt"], rows[-1]["role"]) == (None, None, "")
    JobPodList.model_validate({"items": rows})
