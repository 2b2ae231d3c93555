"""YAML manifests as users write them, applied with kubectl (which reads YAML its own way, sigs.k8s.io/yaml) to a
real apiserver and read by tjctl's reader and the model: both judge each the same, name the same field, and a
valid one is stored as the model reads it. ConfigMaps beside a job, which `tjctl run` reads for the pods' ConfigMap
volumes, are read as kubectl applies them too."""

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from testbed.controlplane import ControlPlane
from tests.support.corpus_admission import CONFIGMAP_YAML_CASES, YAML_CASES, YamlCase, read_as_tjctl_does
from tests.support.corpus_trainingjob import names_field, pydantic_error_paths

from tjctl.exits import UsageError
from tjctl.local_configmaps import configmaps_in

pytestmark = pytest.mark.envtest

KUBECTL = "/usr/bin/kubectl"


def _kubectl_apply(plane: ControlPlane, text: str) -> tuple[dict[str, Any] | None, str]:
    """What `kubectl apply --dry-run=server` makes of `text`: the object it would store, or None and why not."""
    result = subprocess.run(
        [KUBECTL, "--kubeconfig", str(plane.kubeconfig), "apply", "--dry-run=server", "-o", "json", "-f", "-"],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return (json.loads(result.stdout), "") if result.returncode == 0 else (None, result.stderr)


@pytest.mark.parametrize("case", YAML_CASES, ids=[case.id for case in YAML_CASES])
def test_kubectl_and_the_model_read_a_yaml_manifest_alike(trainingjob_crd: ControlPlane, case: YamlCase) -> None:
    stored, refusal = _kubectl_apply(trainingjob_crd, case.text)
    try:
        job, paths = read_as_tjctl_does(case.text), []
    except ValidationError as error:
        job, paths = None, pydantic_error_paths(error)
    if case.field is None:
        assert stored is not None, refusal
        assert job is not None, paths
        assert stored["spec"] == job.to_manifest()["spec"]
        return
    assert stored is None, "kubectl apply accepted an invalid manifest"
    assert case.field in refusal
    assert any(names_field(path, case.field) for path in paths), paths


@pytest.mark.parametrize("case", CONFIGMAP_YAML_CASES, ids=[case.id for case in CONFIGMAP_YAML_CASES])
def test_kubectl_and_local_mode_read_a_configmap_alike(
    trainingjob_crd: ControlPlane, tmp_path: Path, case: YamlCase
) -> None:
    stored, refusal = _kubectl_apply(trainingjob_crd, case.text)
    (tmp_path / "code.yaml").write_text(case.text)
    if case.field is None:
        assert stored is not None, refusal
        assert configmaps_in(tmp_path) == {"code": stored["data"]}
        return
    assert stored is None, "kubectl apply accepted data that is not text"
    with pytest.raises(UsageError, match=re.escape(case.field)):
        configmaps_in(tmp_path)
