"""Manifests as users write them where the model and the apiserver once judged differently, or both let through
what the pods then refused: YAML scalars that mean one thing to kubectl and another to PyYAML, metadata the
apiserver checks itself, and pod fields Kubernetes checks only when the pods are made (corpus_pod_fields holds
those a bare Pod proves)."""

from dataclasses import dataclass
from textwrap import dedent, indent

from tests.support.corpus_pod_fields import POD_INVALID, POD_VALID
from tests.support.corpus_trainingjob import Case, command_job, job, resources, with_value

from trainingjob.model import TrainingJob
from trainingjob_sdk.documents import parse_yaml


@dataclass(frozen=True)
class YamlCase:
    """A manifest as YAML text (kubectl apply -f reads it, as tjctl and the REST API do); `field` is the wire path
    the refusal names, None when the manifest is valid."""

    id: str
    text: str
    field: str | None = None


def yaml_job(spec: str) -> str:
    """A TrainingJob manifest whose spec is the YAML block `spec`."""
    head = "apiVersion: trainingjob.io/v1alpha1\nkind: TrainingJob\nmetadata:\n  name: corpus\nspec:\n"
    return head + indent(dedent(spec).strip() + "\n", "  ")


_DDP = "mode: DDP\n"

YAML_CASES = [
    YamlCase("yaml-replicas-exponent", yaml_job(_DDP + "workers: {replicas: 1e3}\ntrainer: {steps: 100}")),
    YamlCase("yaml-replicas-whole-float", yaml_job(_DDP + "workers: {replicas: 2.0}\ntrainer: {steps: 100}")),
    YamlCase(
        "yaml-learning-rate-exponent",
        yaml_job(_DDP + "workers: {replicas: 2}\ntrainer: {steps: 100, learningRate: 1e-3}"),
    ),
    YamlCase("yaml-seed-octal", yaml_job(_DDP + "workers: {replicas: 2}\ntrainer: {steps: 100, seed: 0o17}")),
    YamlCase(
        "yaml-suspend-y",
        yaml_job(_DDP + "workers: {replicas: 2}\ntrainer: {steps: 100}\nrunPolicy: {suspend: y}"),
    ),
    YamlCase(
        "yaml-cpu-whole-float",
        yaml_job(_DDP + "workers: {replicas: 2, resources: {limits: {cpu: 2.0}}}\ntrainer: {steps: 100}"),
    ),
    YamlCase(
        "yaml-recipe-config-scalars",
        yaml_job(
            _DDP + "workers: {replicas: 2}\ntrainer:\n  steps: 100\n  entrypoint: recipe.py:build\n"
            "  config: {lr: 1e-3, warmup: 1:30, flip: y, width: 2.0, 0.5: half}"
        ),
    ),
    YamlCase(
        "yaml-steps-sexagesimal",
        yaml_job(_DDP + "workers: {replicas: 2}\ntrainer: {steps: 1:30}"),
        "spec.trainer.steps",
    ),
    YamlCase(
        "yaml-deadline-sexagesimal",
        yaml_job(_DDP + "workers: {replicas: 2}\ntrainer: {steps: 100}\nrunPolicy: {activeDeadlineSeconds: 1:00:00}"),
        "spec.runPolicy.activeDeadlineSeconds",
    ),
    YamlCase(
        "yaml-replicas-fraction",
        yaml_job(_DDP + "workers: {replicas: 2.5}\ntrainer: {steps: 100}"),
        "spec.workers.replicas",
    ),
]


def configmap_yaml(data: str) -> str:
    """A ConfigMap manifest (as written beside a job for `tjctl run`) whose data is the YAML block `data`."""
    return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: code\ndata:\n" + indent(
        dedent(data).strip() + "\n", "  "
    )


# ConfigMaps as local mode reads them and kubectl applies them: `field` is the data key a refusal names.
CONFIGMAP_YAML_CASES = [
    YamlCase("configmap-sexagesimal-stays-text", configmap_yaml("warmup: 1:30\nsteps: '100'")),
    YamlCase("configmap-date-stays-text", configmap_yaml("since: 2024-01-31\nname: 1e3x")),
    YamlCase("configmap-octal-is-a-number", configmap_yaml("mode: 0o17"), "data.mode"),
    YamlCase("configmap-exponent-is-a-number", configmap_yaml("lr: 1e-3"), "data.lr"),
    YamlCase("configmap-y-is-a-boolean", configmap_yaml("debug: y"), "data.debug"),
    YamlCase("configmap-integer", configmap_yaml("workers: 4"), "data.workers"),
]


def _meta(**fields: object) -> dict[str, object]:
    manifest = job()
    manifest["metadata"] = {**manifest["metadata"], **fields}
    return manifest


def _volume(**source: object) -> dict[str, object]:
    return command_job(volumes=[{"name": "data", **source}])


def _env_from(**source: object) -> dict[str, object]:
    return job(workers={"env": [{"name": "A", "valueFrom": source}]})


_MOUNT = {"name": "data", "mountPath": "/data"}
_ENV = "spec.workers.env[0].valueFrom"

ADMISSION_VALID = [
    Case("meta-labels-and-annotations", _meta(labels={"example.com/team": "vision"}, annotations={"note": "a b"})),
    Case("resource-hugepages", job(workers=resources(limits={"hugepages-2Mi": "4Mi", "memory": "1Gi"}))),
    Case("hostpath-typed", _volume(hostPath={"path": "/mnt/data", "type": "DirectoryOrCreate"})),
    Case("env-pod-label", _env_from(fieldRef={"fieldPath": "metadata.labels['example.com/team']"})),
    Case("env-limit", _env_from(resourceFieldRef={"resource": "limits.memory", "divisor": "1Mi"})),
]

ADMISSION_INVALID = [
    Case("meta-label-value-space", _meta(labels={"team": "a b"}), "metadata.labels"),
    Case("meta-label-key-space", _meta(labels={"my team": "a"}), "metadata.labels"),
    Case("meta-label-value-long", _meta(labels={"team": "x" * 64}), "metadata.labels"),
    Case("meta-annotation-key-space", _meta(annotations={"cost center": "42"}), "metadata.annotations"),
    Case("meta-annotations-too-large", _meta(annotations={"a": "x" * 262_144}), "metadata.annotations"),
    Case("meta-finalizer-space", _meta(finalizers=["example.com/a b"]), "metadata.finalizers"),
    Case("meta-snake-case", _meta(generate_name="corpus-"), "metadata.generate_name"),
    Case("meta-unknown-field", _meta(label={"team": "a"}), "metadata.label"),
    Case("resource-without-domain", job(workers=resources(limits={"gpu": 1})), "spec.workers.resources.limits"),
    Case(
        "resource-request-without-domain",
        job(workers=resources(requests={"storage": "1Gi"})),
        "spec.workers.resources.requests",
    ),
    Case(
        "resource-quota-name",
        job(workers=resources(limits={"requests.example.com/fpga": 1})),
        "spec.workers.resources.limits",
    ),
    Case(
        "label-key-prefix-dots",
        job(workers={"nodeSelector": {"nvidia..com/gpu.product": "H100"}}),
        "spec.workers.nodeSelector",
    ),
    Case(
        "hostpath-type-typo",
        _volume(hostPath={"path": "/mnt/data", "type": "Directroy"}),
        "spec.workers.volumes[0].hostPath.type",
    ),
    Case(
        "checkpoint-hostpath-type-typo",
        job(checkpoint={"volume": {"hostPath": {"path": "/ckpt", "type": "directory"}}, "everySteps": 10}),
        "spec.checkpoint.volume.hostPath.type",
    ),
    Case(
        "hostpath-climbs-out",
        _volume(hostPath={"path": "/mnt/../etc"}),
        "spec.workers.volumes[0].hostPath.path",
    ),
    Case(
        "subpath-climbs-out",
        with_value(_volume(emptyDir={}), "spec.workers.volumeMounts", [{**_MOUNT, "subPath": "a/../../b"}]),
        "spec.workers.volumeMounts[0].subPath",
    ),
    Case("nfs-without-server", _volume(nfs={"server": "", "path": "/export"}), "spec.workers.volumes[0].nfs.server"),
    Case("env-field-unknown", _env_from(fieldRef={"fieldPath": "spec.hostname"}), f"{_ENV}.fieldRef.fieldPath"),
    Case(
        "env-field-api-version",
        _env_from(fieldRef={"fieldPath": "metadata.name", "apiVersion": "v2"}),
        f"{_ENV}.fieldRef.apiVersion",
    ),
    Case(
        "env-resource-extended",
        _env_from(resourceFieldRef={"resource": "limits.nvidia.com/gpu"}),
        f"{_ENV}.resourceFieldRef.resource",
    ),
    Case(
        "env-key-dot-dot",
        _env_from(secretKeyRef={"name": "s", "key": "..token"}),
        f"{_ENV}.secretKeyRef.key",
    ),
]

ADMISSION_VALID += [case.case for case in POD_VALID]
ADMISSION_INVALID += [case.case for case in POD_INVALID]
ADMISSION_CASES = ADMISSION_VALID + ADMISSION_INVALID


def read_as_tjctl_does(text: str) -> TrainingJob:
    """The job in a YAML manifest as tjctl, the SDK and the REST API read it."""
    return TrainingJob.from_manifest(parse_yaml(text))
