"""Pods a node's kubelet refused to admit (plan/refused.py): no failure of the attempt and no restart counted (not
against disruptionLimit either); the refused slot's pod alone is created again after a backoff that doubles with
each refusal; the startup deadline counts from the slot's first refusal across the re-creations, and fails the job
naming the node and its reason; a pod of the slot that runs clears it."""

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pytest
from tests.support.builders import SETTINGS, at, condition, created_names, pod, running, seen, with_policy

from trainingjob.children import timeline
from trainingjob.children.naming import Replica
from trainingjob.model import Phase, SlotBackoff, TrainingJob
from trainingjob.plan import plan, refused

pytestmark = pytest.mark.fast

BASE, MOST = SETTINGS.backoff_base_seconds, SETTINGS.backoff_max_seconds
GPU = "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, requested: 8, used: 8, capacity: 8"
REASONS = {
    "out-of-gpu": ("OutOfnvidia.com/gpu", GPU),
    "out-of-cpu": ("OutOfcpu", "Pod was rejected: Node didn't have enough resource: cpu"),
    "device-plugin": ("UnexpectedAdmissionError", "Allocate failed due to no healthy devices present"),
    "node-affinity": ("NodeAffinity", "Pod was rejected: Predicate NodeAffinity failed"),
}
REFUSED = "job-worker-1-1"


@dataclass
class Cluster:
    """A job and its pods as the planner sees them: pods it creates stay Pending until the test says otherwise, pods
    it deletes go at once."""

    job: TrainingJob
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    created_at: list[datetime] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    made: int = 0

    def __post_init__(self) -> None:
        ps = self.job.spec.parameter_servers
        servers = [Replica("ps", i) for i in range(ps.replicas)] if ps is not None else []
        workers = [Replica("worker", i) for i in range(self.job.spec.workers.replicas)]
        self.pods = {r.pod_name("job", 1): pod(self.job, r, 1) for r in [*servers, *workers]}

    def refuse(self, now: datetime, reason: str = "OutOfnvidia.com/gpu", message: str = GPU) -> None:
        uid = self.pods[REFUSED]["metadata"]["uid"]
        self.pods[REFUSED] = pod(
            self.job, Replica("worker", 1), 1, "Failed", uid=uid, created=now, reason=reason, message=message,
            node="gpu-node-7",
        )  # fmt: skip

    def run(self) -> None:
        uid = self.pods[REFUSED]["metadata"]["uid"]
        self.pods[REFUSED] = pod(self.job, Replica("worker", 1), 1, uid=uid)

    def reconcile(self, now: datetime) -> None:
        result = plan(self.job, seen(list(self.pods.values())), now, SETTINGS)
        self.job = self.job.model_copy(update={"status": result.status})
        self.events += [f"{e.reason}: {e.message}" for e in result.events]
        for name in result.delete:
            self.pods.pop(name, None)
        for name in created_names(result):
            self.made += 1
            self.pods[name] = pod(self.job, Replica("worker", 1), 1, "Pending", uid=f"uid-{self.made}", created=now)
            self.created_at.append(now)

    @property
    def status(self) -> Any:
        assert self.job.status is not None
        return self.job.status


def cluster(mode: str, **policy: Any) -> Cluster:
    servers = 1 if mode == "ParameterServer" else 0
    return Cluster(running(mode=mode, workers=2, servers=servers, **policy))


@pytest.mark.parametrize("mode", ["DDP", "ParameterServer"])
@pytest.mark.parametrize("reason", list(REASONS))
def test_a_refused_pod_is_created_again_alone_and_counts_no_restart(mode: str, reason: str) -> None:
    """Even with no restart allowed at all, a node's refusal fails nothing: the refused pod alone goes, and comes
    back after the base backoff; the Warning names the node, its reason and its words."""
    c = cluster(mode, backoffLimit=0, disruptionLimit=0, restartPolicy="Never")
    c.refuse(at(1), *REASONS[reason])
    before = set(c.pods)
    c.reconcile(at(1))
    assert c.status.phase in (Phase.RUNNING, Phase.PENDING) and c.status.attempt == 1
    assert c.status.restarts.total == 0 and c.status.last_failure is None
    assert set(c.pods) == before - {REFUSED}
    warning = next(e for e in c.events if e.startswith("PodRefusedByNode"))
    assert f"Pod {REFUSED} was refused by node gpu-node-7 ({REASONS[reason][0]}: {REASONS[reason][1]})" in warning
    c.reconcile(at(1 + BASE - 0.5))
    assert c.created_at == []
    c.reconcile(at(1 + BASE))
    assert c.created_at == [at(1 + BASE)] and c.status.attempt == 1 and c.status.restarts.total == 0


@pytest.mark.parametrize(
    ("refusals", "delay"),
    [
        pytest.param(1, BASE, id="first-base"),
        pytest.param(2, 2 * BASE, id="second-doubles"),
        pytest.param(4, 8 * BASE, id="fourth-doubles-thrice"),
        pytest.param(8, MOST, id="capped-at-max"),
    ],
)
def test_each_refusal_doubles_the_slots_delay(refusals: int, delay: float) -> None:
    c, now = cluster("DDP", startupDeadlineSeconds=100_000), 1.0
    for _ in range(refusals - 1):
        c.refuse(at(now))
        c.reconcile(at(now))
        now += MOST
        c.reconcile(at(now))
    c.refuse(at(now))
    c.reconcile(at(now))
    made = len(c.created_at)
    c.reconcile(at(now + delay - 0.5))
    assert len(c.created_at) == made, f"created again {delay - 0.5} s after refusal {refusals}"
    c.reconcile(at(now + delay))
    assert c.created_at[-1] == at(now + delay)
    assert c.status.replacements[0].refused.count == refusals and c.status.restarts.total == 0


@pytest.mark.parametrize("mode", ["DDP", "ParameterServer"])
def test_pods_no_node_admits_fail_the_job_at_the_startup_deadline_from_the_first_refusal(mode: str) -> None:
    """Refused again each time it is created: the deadline counts from the first refusal, not from the newest pod,
    and the job fails naming the node and the reason, with no disruption counted."""
    c, now = cluster(mode, startupDeadlineSeconds=600), 1.0
    while now < 600:
        if REFUSED in c.pods:
            c.refuse(at(now))
        c.reconcile(at(now))
        now += 5
    assert c.status.phase != Phase.FAILED and len(c.created_at) >= 4
    c.reconcile(at(601))
    assert c.status.phase == Phase.FAILED and c.status.restarts.total == 0
    failed = condition(c.job, "Failed")
    assert failed.reason == "StartupDeadlineExceeded"
    assert f"Pod {REFUSED} was refused by node gpu-node-7: OutOfnvidia.com/gpu" in failed.message
    assert "in 600 s (startupDeadlineSeconds) since the first refusal" in failed.message
    assert c.status.last_failure.reason == "OutOfnvidia.com/gpu" and c.status.last_failure.pod == REFUSED


def test_a_pod_that_runs_clears_the_refusals() -> None:
    c = cluster("DDP", startupDeadlineSeconds=600)
    c.refuse(at(1))
    c.reconcile(at(1))
    c.reconcile(at(1 + BASE))
    c.run()
    c.reconcile(at(20))
    assert c.status.replacements == [] and c.status.phase == Phase.RUNNING  # let go: nothing to back off from
    c.refuse(at(590))  # a new stretch: the deadline counts from here
    c.reconcile(at(590))
    c.reconcile(at(700))
    refusal = c.status.replacements[0].refused
    assert c.status.phase != Phase.FAILED and refusal is not None and refusal.since == at(590)
    assert sum(e.startswith("PodRefusedByNode") for e in c.events) == 2


def test_the_running_condition_says_which_node_refused_the_pod() -> None:
    c = cluster("DDP")
    c.refuse(at(1))
    c.reconcile(at(1))
    said = condition(c.job, "Running").message
    assert f"{REFUSED}: refused by node gpu-node-7 (OutOfnvidia.com/gpu), once since 2026-01-01T00:00:01Z" in said
    assert "created again not before 2026-01-01T00:00:11Z" in said
    c.reconcile(at(1 + BASE))
    c.reconcile(at(2 + BASE))  # the pod created again is seen
    said = condition(c.job, "Running").message
    assert f"{REFUSED}: Pending; refused by node gpu-node-7 (OutOfnvidia.com/gpu), once since" in said


def test_a_resumed_job_keeps_no_slot_backoff_or_refusal_of_before_its_suspension() -> None:
    c = cluster("DDP", startupDeadlineSeconds=600)
    c.refuse(at(1))
    c.reconcile(at(1))
    c.job = with_policy(c.job, suspend=True)
    c.reconcile(at(2))
    c.pods.clear()  # every pod went
    c.reconcile(at(3))
    c.job = with_policy(c.job, suspend=False)
    c.reconcile(at(1000))
    assert c.status.phase != Phase.FAILED and c.status.replacements == []


def test_one_warning_names_the_first_few_pods_refused_in_a_pass() -> None:
    c = Cluster(running(workers=8))
    names = [Replica("worker", i).pod_name("job", 1) for i in range(8)]
    for i, name in enumerate(names):
        c.pods[name] = pod(c.job, Replica("worker", i), 1, "Failed", reason="OutOfcpu", node=f"n{i}")
    c.reconcile(at(1))
    warnings = [e for e in c.events if e.startswith("PodRefusedByNode")]
    assert len(warnings) == 1 and "; and 5 more pods. Each is created again alone in 10 s" in warnings[0]
    assert all(f"Pod {n}" in warnings[0] or f"pod {n}" in warnings[0] for n in names[:3]), warnings[0]


def test_at_most_most_slots_refused_pods_are_handled_at_once_and_the_rest_wait_uncounted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each handled slot has a record in the status: beyond MOST_SLOTS the refused pods wait, never counted as a
    failure of the attempt, and are handled as slots clear (README, "Status at scale")."""
    monkeypatch.setattr(refused, "MOST_SLOTS", 3)
    c = Cluster(running(workers=6, backoffLimit=0, disruptionLimit=0))
    names = [Replica("worker", i).pod_name("job", 1) for i in range(6)]
    for i, name in enumerate(names[1:], start=1):
        c.pods[name] = pod(c.job, Replica("worker", i), 1, "Failed", reason="OutOfcpu", node=f"n{i}")
    c.reconcile(at(1))
    assert [r.pod for r in c.status.replacements] == names[1:4] and set(c.pods) == {names[0], *names[4:]}
    assert c.status.phase != Phase.FAILED and c.status.restarts.total == 0 and c.status.attempt == 1
    c.pods[names[1]] = pod(c.job, Replica("worker", 1), 1)  # slot 1's pod, made again, runs
    c.reconcile(at(2))
    assert [r.pod for r in c.status.replacements] == names[2:5] and names[4] not in c.pods, "slot 1 let go"
    assert c.status.restarts.total == 0 and c.status.attempt == 1


def test_letting_go_of_a_refusal_slot_keeps_a_worker_replaced_after_a_disruption() -> None:
    """A ParameterServer worker replaced alone after a disruption has a slot with no failure of the job's own; it is
    not let go of when another slot's refusals end."""
    c = cluster("ParameterServer")
    disrupted = Replica("worker", 0).pod_name("job", 1)
    c.refuse(at(1))
    c.reconcile(at(1))
    own = SlotBackoff(pod=disrupted, not_before=at(50))
    c.job = c.job.model_copy(
        update={"status": c.status.model_copy(update={"replacements": [own, *c.status.replacements]})}
    )
    c.reconcile(at(1 + BASE))
    c.run()
    c.reconcile(at(20))
    assert c.status.replacements == [own]


@pytest.mark.parametrize("mode", ["DDP", "ParameterServer"])
def test_a_slots_refusals_are_kept_in_the_history_and_shown_on_the_timeline(mode: str) -> None:
    """One record per stretch of refusals (its pod, node, reason, count and first refusal), brought up to date
    with each refusal and kept once the pod runs; the timeline (tjctl timeline, the dashboard) says it in words."""
    c, now = cluster(mode, startupDeadlineSeconds=100_000), 62.0
    for _ in range(3):
        c.refuse(at(now))
        c.reconcile(at(now))
        now += MOST
        c.reconcile(at(now))
    c.run()
    c.reconcile(at(now + 1))
    assert c.status.replacements == [] or all(r.refused is None for r in c.status.replacements)
    (record,) = c.status.history.refusals
    assert (record.pod, record.attempt, record.since, record.time) == (REFUSED, 1, at(62), at(62 + 2 * MOST))
    assert (record.count, record.node, record.reason) == (3, "gpu-node-7", "OutOfnvidia.com/gpu")
    c.reconcile(at(now + 2))
    assert c.status.history.refusals == [record]  # nothing new, nothing written

    found = timeline.build(c.job.model_dump(mode="json", by_alias=True, exclude_none=True), [], at(now + 2))
    (mark,) = [m for m in found.marks if m.kind == "refused"]
    assert (mark.row, mark.time) == ("attempt-1", at(62))
    said = f"{REFUSED} refused by node gpu-node-7: OutOfnvidia.com/gpu, 3 times since 00:01:02 UTC"
    assert mark.label.startswith(said)
