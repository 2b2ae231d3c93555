"""The TrainingJob model: the manifest corpus, defaults, status, quantities and the immutable fields."""

import json
import subprocess
import sys
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from pydantic import ValidationError
from tests.support.corpus_admission import (
    ADMISSION_CASES,
    ADMISSION_INVALID,
    ADMISSION_VALID,
    YAML_CASES,
    YamlCase,
    read_as_tjctl_does,
)
from tests.support.corpus_trainingjob import (
    CASES,
    INVALID,
    VALID,
    Case,
    checkpoint,
    job,
    names_field,
    ps_job,
    pydantic_error_paths,
    with_value,
)

from trainer.config import TrainerConfig  # the trainer's own parser of TJ_TRAINER_CONFIG
from trainingjob.model import (
    DEFAULT_SHM_SIZE,
    Mode,
    Phase,
    RestartPolicy,
    TrainerSpec,
    TrainingJob,
    TrainingJobStatus,
    changed_immutable_fields,
    parse_quantity,
)

pytestmark = pytest.mark.fast


def _ids(cases: list[Case]) -> list[str]:
    return [case.id for case in cases]


def test_corpus_is_large_and_its_ids_are_unique() -> None:
    assert len(CASES) >= 30
    assert len(VALID) >= 10
    ids = [case.id for case in CASES + ADMISSION_CASES + YAML_CASES]
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize("case", VALID + ADMISSION_VALID, ids=_ids(VALID + ADMISSION_VALID))
def test_valid_manifest_is_accepted_and_round_trips(case: Case) -> None:
    parsed = TrainingJob.model_validate(case.manifest)
    again = TrainingJob.model_validate(parsed.to_manifest())
    assert again == parsed
    assert TrainingJob.model_validate_json(json.dumps(case.manifest)) == parsed


def _validate_json(manifest: dict[str, Any]) -> TrainingJob:
    return TrainingJob.model_validate_json(json.dumps(manifest), by_alias=True, by_name=False)


@pytest.mark.parametrize("case", INVALID + ADMISSION_INVALID, ids=_ids(INVALID + ADMISSION_INVALID))
@pytest.mark.parametrize("validate", [TrainingJob.from_manifest, _validate_json], ids=["python", "json"])
def test_invalid_manifest_is_refused_naming_the_field(
    case: Case, validate: Callable[[dict[str, Any]], TrainingJob]
) -> None:
    assert case.field is not None
    with pytest.raises(ValidationError) as caught:
        validate(case.manifest)
    paths = pydantic_error_paths(caught.value)
    assert any(names_field(path, case.field) for path in paths), paths


@pytest.mark.parametrize("case", YAML_CASES, ids=[case.id for case in YAML_CASES])
def test_a_yaml_manifest_is_judged_as_kubectl_apply_judges_it(case: YamlCase) -> None:
    """tjctl, the SDK and the REST API read YAML as kubectl does (1:30 is text, 1e3 a number, y true) and the model
    takes a whole number where an integer is due; test_crd_yaml checks the same cases against kubectl."""
    if case.field is None:
        read_as_tjctl_does(case.text)
        return
    with pytest.raises(ValidationError) as caught:
        read_as_tjctl_does(case.text)
    paths = pydantic_error_paths(caught.value)
    assert any(names_field(path, case.field) for path in paths), paths


def test_a_newcomer_gets_sensible_defaults() -> None:
    spec = TrainingJob.model_validate(job(workers={})).spec
    assert spec.mode == Mode.DDP
    assert spec.workers.replicas == 1
    assert spec.workers.nproc_per_pod == 1
    assert spec.workers.image is None  # the operator's default trainer image, chosen when pods are made
    assert spec.workers.shm_size == DEFAULT_SHM_SIZE
    assert spec.run_policy.restart_policy == RestartPolicy.EXIT_CODE
    assert spec.run_policy.effective_permanent_exit_codes == (78,)
    assert spec.run_policy.backoff_limit == 3
    assert spec.run_policy.suspend is False


@pytest.mark.parametrize(
    ("workers", "fewest"),
    [({"replicas": 4}, 4), ({"replicas": 4, "minReplicas": 2}, 2), ({"replicas": 3, "minReplicas": 3}, 3)],
    ids=["unset-is-replicas-not-elastic", "elastic", "min-equals-replicas"],
)
def test_min_replicas_defaults_to_replicas(workers: dict[str, int], fewest: int) -> None:
    spec = TrainingJob.model_validate(job(workers=workers)).spec
    assert spec.workers.fewest_replicas == fewest


def test_checkpoint_defaults() -> None:
    spec = TrainingJob.model_validate(job(checkpoint=checkpoint())).spec
    assert spec.checkpoint is not None
    assert (spec.checkpoint.path, spec.checkpoint.keep) == ("/checkpoints", 3)


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ({"restartPolicy": "Never"}, ()),
        ({"restartPolicy": "OnFailure"}, ()),
        ({"restartPolicy": "ExitCode", "permanentExitCodes": [1, 2]}, (1, 2)),
    ],
    ids=["never", "on-failure", "exit-code-given"],
)
def test_effective_permanent_exit_codes(policy: dict[str, Any], expected: tuple[int, ...]) -> None:
    spec = TrainingJob.model_validate(job(runPolicy=policy)).spec
    assert spec.run_policy.effective_permanent_exit_codes == expected


@pytest.mark.parametrize(
    ("phase", "terminal"),
    [
        (Phase.PENDING, False),
        (Phase.RUNNING, False),
        (Phase.RESTARTING, False),
        (Phase.SUSPENDED, False),
        (Phase.SUCCEEDED, True),
        (Phase.FAILED, True),
    ],
)
def test_only_succeeded_and_failed_are_terminal(phase: Phase, terminal: bool) -> None:
    assert phase.is_terminal is terminal


def _status() -> dict[str, Any]:
    now = "2025-01-01T00:00:00Z"
    return {
        "phase": "Restarting",
        "conditions": [{"type": "Restarting", "status": "True", "reason": "WorkerFailed", "lastTransitionTime": now}],
        "observedGeneration": 1,
        "workers": {"active": 1, "ready": 1, "failed": 1},
        "attempt": 2,
        "restarts": {"retryable": 1, "disruption": 2},
        "lastFailure": {
            "pod": "j-worker-1-1",
            "attempt": 1,
            "failureClass": "Retryable",
            "exitCode": 75,
            "reason": "Error",
            "logTail": "RuntimeError: NCCL timeout",
            "time": now,
        },
        "lastCheckpoint": {"step": 400, "path": "/checkpoints/step-400", "time": now},
        "progress": {"step": 410, "loss": 0.12, "samplesPerSecond": 900.5, "lastHeartbeatTime": now},
        "startTime": now,
    }


def test_status_parses_and_round_trips() -> None:
    status = TrainingJobStatus.model_validate(_status())
    assert status.phase == Phase.RESTARTING
    assert status.restarts.disruption == 2
    assert TrainingJobStatus.model_validate(status.model_dump(mode="json")) == status


@pytest.mark.parametrize(
    ("change", "value"),
    [("conditions", [{"type": "Failed", "status": "Maybe"}]), ("attempt", -1), ("phase", "Done")],
    ids=["condition-status", "negative-attempt", "unknown-phase"],
)
def test_status_refuses_nonsense(change: str, value: Any) -> None:
    with pytest.raises(ValidationError):
        TrainingJobStatus.model_validate({**_status(), change: value})


@pytest.mark.parametrize(
    ("quantity", "value"),
    [(2, "2"), ("500m", "0.5"), ("1Gi", "1073741824"), ("1.5k", "1500"), ("1e3", "1000"), ("+4", "4")],
    ids=["int", "milli", "gibi", "kilo", "exponent", "plus"],
)
def test_parse_quantity(quantity: int | str, value: str) -> None:
    assert parse_quantity(quantity) == Decimal(value)


def _change(path: str, value: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    old = ps_job(checkpoint=checkpoint())
    return old, with_value(old, path, value)


def _to_parameter_server() -> tuple[dict[str, Any], dict[str, Any]]:
    old = job()
    return old, with_value(with_value(old, "spec.mode", "ParameterServer"), "spec.parameterServers", {})


IMMUTABILITY_IDS = ["mode", "replicas", "ps-image", "trainer", "ckpt-path", "ckpt-volume", "ps-resources"]
IMMUTABILITY_IDS += ["backoff", "suspend", "keep"]


@pytest.mark.parametrize(
    ("old_and_new", "expected"),
    [
        (_to_parameter_server(), ["spec.mode", "spec.parameterServers"]),
        (_change("spec.workers.replicas", 3), ["spec.workers.replicas"]),
        (_change("spec.parameterServers.image", "other:1"), ["spec.parameterServers.image"]),
        (_change("spec.trainer.workload", "synthetic"), ["spec.trainer"]),
        (_change("spec.checkpoint.path", "/elsewhere"), ["spec.checkpoint.path"]),
        (_change("spec.checkpoint.volume", {"emptyDir": {}}), ["spec.checkpoint.volume"]),
        (_change("spec.parameterServers.resources", {"limits": {"cpu": 2}}), []),
        (_change("spec.runPolicy.backoffLimit", 9), []),
        (_change("spec.runPolicy.suspend", True), []),
        (_change("spec.checkpoint.keep", 9), []),
    ],
    ids=IMMUTABILITY_IDS,
)
def test_changed_immutable_fields(old_and_new: tuple[dict[str, Any], dict[str, Any]], expected: list[str]) -> None:
    old, new = (TrainingJob.model_validate(manifest) for manifest in old_and_new)
    assert changed_immutable_fields(old, new) == expected


def test_model_imports_no_kubernetes_client_kopf_or_fastapi() -> None:
    code = (
        "import sys, trainingjob.model, trainingjob.model.rules;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'kopf', 'kubernetes', 'fastapi'}))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize("case", [c for c in VALID if "trainer" in c.manifest["spec"]], ids=lambda c: c.id)
def test_the_trainer_accepts_every_valid_trainer_spec(case: Case) -> None:
    trainer = TrainingJob.model_validate(case.manifest).spec.trainer
    assert trainer is not None
    assert set(TrainerConfig.model_fields) == set(TrainerSpec.model_fields)
    TrainerConfig.model_validate(trainer.model_dump(mode="json", exclude_none=True))


def test_a_config_larger_than_the_limit_is_refused_naming_it() -> None:
    trainer = {"entrypoint": "m:f", "steps": 1, "config": {"blob": "x" * 40000}}
    with pytest.raises(ValidationError, match=r"trainer\.config[\s\S]*at most 32768 bytes"):
        TrainingJob.model_validate(job(trainer=trainer))
