"""Local mode's stand-ins for ConfigMap and emptyDir volumes, and the paths moved to them."""

import re
from pathlib import Path

import pytest
from tests.support.corpus_admission import CONFIGMAP_YAML_CASES, YamlCase, configmap_yaml

from tjctl.exits import UsageError
from tjctl.local_configmaps import configmaps_in
from trainingjob.local.files import mount_folders, relocate

pytestmark = pytest.mark.fast

CONFIGMAP = """
apiVersion: v1
kind: ConfigMap
metadata: {name: code}
data:
  train.py: print("hi")
  extra.txt: "1"
---
kind: PersistentVolumeClaim
metadata: {name: not-a-configmap}
"""


def pod(volume: dict[str, object], mount_path: str = "/code") -> dict[str, object]:
    return {
        "volumes": [{"name": "v", **volume}],
        "containers": [{"name": "trainer", "volumeMounts": [{"name": "v", "mountPath": mount_path}]}],
    }


def test_configmaps_are_read_from_the_yaml_files_beside_the_job(tmp_path: Path) -> None:
    (tmp_path / "code.yaml").write_text(CONFIGMAP)
    (tmp_path / "broken.yaml").write_text("a: [")
    (tmp_path / "notes.md").write_text("kind: ConfigMap")
    assert configmaps_in(tmp_path) == {"code": {"train.py": 'print("hi")', "extra.txt": "1"}}


READ_AS_KUBECTL = {  # what each valid case's data is to kubectl (test_crd_yaml.py checks it against kubectl)
    "configmap-sexagesimal-stays-text": {"warmup": "1:30", "steps": "100"},
    "configmap-date-stays-text": {"since": "2024-01-31", "name": "1e3x"},
}


@pytest.mark.parametrize("case", CONFIGMAP_YAML_CASES, ids=[case.id for case in CONFIGMAP_YAML_CASES])
def test_configmaps_are_read_as_kubectl_reads_them(tmp_path: Path, case: YamlCase) -> None:
    (tmp_path / "code.yaml").write_text(case.text)
    if case.field is None:
        assert configmaps_in(tmp_path) == {"code": READ_AS_KUBECTL[case.id]}
        return
    with pytest.raises(UsageError, match=re.escape(case.field)):
        configmaps_in(tmp_path)


def test_yaml_kubectl_would_not_read_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "anchors.yaml").write_text(configmap_yaml("a: &x text\nb: *x"))
    assert configmaps_in(tmp_path) == {}


def test_a_configmap_volume_becomes_a_folder_of_its_files(tmp_path: Path) -> None:
    folders = mount_folders(pod({"configMap": {"name": "code"}}), configmaps_in_text(tmp_path), tmp_path)
    assert (folders["/code"] / "train.py").read_text() == 'print("hi")'
    only = pod({"configMap": {"name": "code", "items": [{"key": "train.py", "path": "src/main.py"}]}})
    folders = mount_folders(only, configmaps_in_text(tmp_path), tmp_path / "items")
    assert [p.name for p in folders["/code"].rglob("*") if p.is_file()] == ["main.py"]


@pytest.mark.parametrize("path", ["../escaped.py", "src/../../escaped.py", "{tmp}/escaped.py"])
def test_a_configmap_item_cannot_leave_its_folder(tmp_path: Path, path: str) -> None:
    (tmp_path / "job").mkdir()
    item = {"key": "train.py", "path": path.format(tmp=tmp_path)}  # the last one absolute
    climbing = pod({"configMap": {"name": "code", "items": [item]}})
    with pytest.raises(ValueError, match="leaves the volume's folder"):
        mount_folders(climbing, configmaps_in_text(tmp_path), tmp_path / "job")
    assert not list(tmp_path.rglob("escaped.py"))


def configmaps_in_text(folder: Path) -> dict[str, dict[str, str]]:
    (folder / "code.yaml").write_text(CONFIGMAP)
    return configmaps_in(folder)


def test_a_missing_configmap_says_how_to_provide_it(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="ConfigMap 'elsewhere' as a manifest beside the job's"):
        mount_folders(pod({"configMap": {"name": "elsewhere"}}), {}, tmp_path)


def test_empty_dirs_get_a_folder_and_system_mounts_are_left_alone(tmp_path: Path) -> None:
    assert mount_folders(pod({"emptyDir": {}}, "/scratch"), {}, tmp_path) == {"/scratch": tmp_path / "volumes" / "v"}
    assert mount_folders(pod({"emptyDir": {"medium": "Memory"}}, "/dev/shm"), {}, tmp_path) == {}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("/code", "/local/code", id="the-mount-itself"),
        pytest.param("/code/train.py", "/local/code/train.py", id="a-file-under-it"),
        pytest.param("/code/sub/x", "/local/sub/x", id="the-longest-mount-wins"),
        pytest.param("/codebase/x", "/codebase/x", id="not-a-prefix-of-a-name"),
        pytest.param("train.py:build", "train.py:build", id="relative"),
    ],
)
def test_relocate(value: str, expected: str) -> None:
    assert relocate(value, {"/code": Path("/local/code"), "/code/sub/": Path("/local/sub")}) == expected
