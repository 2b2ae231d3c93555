"""TrainingJob manifests, valid and invalid, that both pydantic and the apiserver must judge the same way."""

import copy
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

Manifest = dict[str, Any]


@dataclass(frozen=True)
class Case:
    """One manifest; `field` is the wire path of the offending field, or None when the manifest is valid."""

    id: str
    manifest: Manifest
    field: str | None = None

    @property
    def is_valid(self) -> bool:
        return self.field is None


def job(name: str = "corpus", **spec: Any) -> Manifest:
    """A valid DDP job with the built-in trainer; `spec` keys replace the defaults."""
    base: dict[str, Any] = {"mode": "DDP", "workers": {"replicas": 2}, "trainer": {"steps": 100}}
    return {
        "apiVersion": "trainingjob.io/v1alpha1",
        "kind": "TrainingJob",
        "metadata": {"name": name},
        "spec": {**base, **spec},
    }


def ps_job(**spec: Any) -> Manifest:
    """A valid ParameterServer job with the built-in trainer."""
    return job(mode="ParameterServer", parameterServers={"replicas": 2}, workers={"replicas": 4}, **spec)


def command_job(**workers: Any) -> Manifest:
    """A valid DDP job that runs a user command."""
    role = {"replicas": 2, "image": "pytorch/pytorch:2.5.1", "command": ["torchrun", "train.py"], **workers}
    manifest = job(workers=role)
    del manifest["spec"]["trainer"]
    return manifest


def with_value(manifest: Manifest, path: str, value: Any) -> Manifest:
    """A copy of `manifest` with the dotted `path` set to `value`, creating objects on the way."""
    result = copy.deepcopy(manifest)
    *parents, last = path.split(".")
    node = result
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return result


def without(manifest: Manifest, path: str) -> Manifest:
    """A copy of `manifest` with the dotted `path` removed."""
    result = copy.deepcopy(manifest)
    *parents, last = path.split(".")
    node = result
    for key in parents:
        node = node[key]
    del node[last]
    return result


def resources(**quantities: Any) -> dict[str, Any]:
    return {"replicas": 2, "resources": quantities}


def checkpoint(**settings: Any) -> dict[str, Any]:
    return {"volume": {"persistentVolumeClaim": {"claimName": "ckpt"}}, "everySteps": 50, **settings}


ENV_SECRET = {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}
PVC_VOLUME = {"name": "data", "persistentVolumeClaim": {"claimName": "data", "readOnly": True}}
CSI_VOLUME = {"name": "lake", "csi": {"driver": "s3.csi.example.com", "volumeAttributes": {"bucket": "b"}}}
NODE_AFFINITY = {
    "requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100"]}]}]
    }
}

DATA_VOLUME = {"name": "data", "emptyDir": {}}
SPREAD = {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule"}


def sidecar(**fields: Any) -> dict[str, Any]:
    """A valid sidecar (or init container) with `fields` added."""
    return {"name": "shipper", "image": "fluent/fluent-bit:3.1", **fields}


def pod_fields_job(**workers: Any) -> Manifest:
    """A command job whose workers use every pod field beyond the trainer's container; `workers` replaces some."""
    fields: dict[str, Any] = {
        "envFrom": [
            {"configMapRef": {"name": "settings"}, "prefix": "CFG_"},
            {"secretRef": {"name": "hf", "optional": True}},
        ],
        "volumes": [DATA_VOLUME],
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
        "initContainers": [
            sidecar(
                name="fetch",
                image="busybox:1.36",
                command=["sh", "-c", "echo fetched > /data/ready"],
                env=[{"name": "SOURCE", "value": "s3://bucket/set"}],
                envFrom=[{"secretRef": {"name": "s3"}}],
                volumeMounts=[{"name": "data", "mountPath": "/data"}],
                resources={"limits": {"cpu": "1", "memory": "256Mi"}},
                workingDir="/data",
            )
        ],
        "sidecars": [sidecar(volumeMounts=[{"name": "data", "mountPath": "/logs", "readOnly": True}])],
        "imagePullSecrets": [{"name": "registry"}],
        "podMetadata": {"labels": {"team": "vision"}, "annotations": {"example.com/cost-center": "42"}},
        "runtimeClassName": "nvidia",
        "topologySpreadConstraints": [
            SPREAD,
            {**SPREAD, "topologyKey": "topology.kubernetes.io/zone", "minDomains": 2},
        ],
        "securityContext": {"supplementalGroups": [3000, 3001]},
        "shmSize": "2Gi",
    }
    return command_job(**(fields | workers))


VALID = [
    Case("minimal-ddp", job(workers={})),
    Case("ddp-with-checkpoint", job(checkpoint=checkpoint(everySeconds=600, keep=5))),
    Case("checkpoint-paced-to-failures", job(checkpoint=checkpoint(everySteps="Auto"))),
    Case("parameter-server", ps_job()),
    Case("elastic-ddp", job(workers={"replicas": 4, "minReplicas": 2})),
    Case("elastic-not-shrinking", job(workers={"replicas": 2, "minReplicas": 2})),
    Case("elastic-ps-workers", with_value(ps_job(), "spec.workers.minReplicas", 1)),
    Case("ps-staleness", ps_job(trainer={"epochs": 2, "stalenessBound": 0})),
    Case("user-command", command_job(args=["--lr", "0.1"], workingDir="/workspace")),
    Case("gpu-integer", job(workers=resources(limits={"nvidia.com/gpu": 1}))),
    Case("gpu-eight-nproc", job(workers={**resources(limits={"nvidia.com/gpu": "8"}), "nprocPerPod": 8})),
    Case(
        "quantities",
        job(workers=resources(requests={"cpu": "500m", "memory": "1.5Gi", "ephemeral-storage": "1e3"})),
    ),
    Case("requests-within-limits", job(workers=resources(requests={"cpu": "1"}, limits={"cpu": "1500m"}))),
    Case("env-secret", job(workers={"env": [{"name": "A", "value": "1"}, ENV_SECRET]})),
    Case(
        "volumes",
        command_job(
            volumes=[PVC_VOLUME, CSI_VOLUME],
            volumeMounts=[{"name": "data", "mountPath": "/data", "readOnly": True}],
        ),
    ),
    Case(
        "configmap-items-nested",
        command_job(
            volumes=[
                {"name": "cfg", "configMap": {"name": "c", "items": [{"key": "k", "path": "conf/..hidden/.k.yaml"}]}}
            ],
        ),
    ),
    Case("tolerations", job(workers={"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]})),
    Case(
        "affinity",
        job(workers={"affinity": {"nodeAffinity": NODE_AFFINITY}, "nodeSelector": {"gpu": "h100"}}),
    ),
    Case("exit-code-policy", job(runPolicy={"restartPolicy": "ExitCode", "permanentExitCodes": [78, 1, 255]})),
    Case("never-suspended", job(runPolicy={"restartPolicy": "Never", "suspend": True, "cleanPodPolicy": "All"})),
    Case(
        "deadlines",
        job(
            runPolicy={
                "activeDeadlineSeconds": 3600,
                "startupDeadlineSeconds": 600,
                "ttlSecondsAfterFinished": 0,
            }
        ),
    ),
    Case(
        "scheduling",
        ps_job(scheduling={"queueName": "team-a", "minAvailable": 6, "schedulerName": "volcano"}),
    ),
    Case("sgd-momentum", job(trainer={"epochs": 3, "optimizer": "sgd", "momentum": 0.9, "learningRate": 1})),
    Case(
        "recipe",
        job(
            trainer={
                "entrypoint": "shapes.py:build",
                "config": {"width": 8, "layers": [16, 32], "augment": {"flip": True}},
                "steps": 300,
                "gradientAccumulationSteps": 4,
                "clipGradNorm": 1.0,
                "precision": "bf16",
                "dataLoaderWorkers": 2,
                "evalEverySteps": 100,
            }
        ),
    ),
    Case("recipe-module", ps_job(trainer={"entrypoint": "my_team.models.cnn:build", "epochs": 2})),
    Case(
        "hostpath-checkpoint",
        job(checkpoint={"volume": {"hostPath": {"path": "/mnt/ckpt"}}, "everySeconds": 30}),
    ),
    Case(
        "grace-period",
        with_value(ps_job(), "spec.parameterServers.terminationGracePeriodSeconds", 900),
    ),
    Case("root-by-choice", job(workers={"securityContext": {"runAsUser": 0, "runAsNonRoot": False}})),
    Case("rdma-capability", job(workers={"securityContext": {"addCapabilities": ["IPC_LOCK"], "fsGroup": 0}})),
    Case("pod-fields", pod_fields_job()),
    Case(
        "sidecar-root-by-choice",
        command_job(sidecars=[sidecar(securityContext={"runAsUser": 0, "runAsNonRoot": False})]),
    ),
    Case(
        "spread-selector",
        job(
            workers={
                "topologySpreadConstraints": [
                    {
                        **SPREAD,
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": {
                            "matchLabels": {"trainingjob.io/role": "worker"},
                            "matchExpressions": [{"key": "trainingjob.io/job-name", "operator": "Exists"}],
                        },
                        "nodeTaintsPolicy": "Honor",
                    }
                ]
            }
        ),
    ),
]


def _bad_trainer(**trainer: Any) -> Manifest:
    return job(trainer={"steps": 100, **trainer})


INVALID = [
    Case("unknown-spec-field", job(gpus=4), "spec.gpus"),
    Case("unknown-role-field", job(workers={"replica": 2}), "spec.workers.replica"),
    Case("missing-workers", without(job(), "spec.workers"), "spec.workers"),
    Case("replicas-wrong-type", job(workers={"replicas": "two"}), "spec.workers.replicas"),
    Case("replicas-negative", job(workers={"replicas": -1}), "spec.workers.replicas"),
    Case("min-replicas-above-replicas", job(workers={"replicas": 2, "minReplicas": 3}), "spec.workers.minReplicas"),
    Case("min-replicas-zero", job(workers={"replicas": 2, "minReplicas": 0}), "spec.workers.minReplicas"),
    Case(
        "min-replicas-above-ps-workers",
        with_value(ps_job(), "spec.workers.minReplicas", 5),
        "spec.workers.minReplicas",
    ),
    Case(
        "replicas-zero-ps",
        with_value(ps_job(), "spec.parameterServers.replicas", 0),
        "spec.parameterServers.replicas",
    ),
    Case("mode-unknown", job(mode="Horovod"), "spec.mode"),
    Case("ps-mode-without-ps", job(mode="ParameterServer"), "spec.parameterServers"),
    Case("ddp-with-ps", job(parameterServers={"replicas": 1}), "spec.parameterServers"),
    Case("staleness-in-ddp", _bad_trainer(stalenessBound=2), "spec.trainer.stalenessBound"),
    Case("trainer-and-command", with_value(job(), "spec.workers.command", ["python"]), "spec.workers.command"),
    Case("neither-trainer-nor-command", without(job(), "spec.trainer"), "spec.trainer"),
    Case(
        "ps-command-with-trainer",
        with_value(ps_job(), "spec.parameterServers.command", ["python", "ps.py"]),
        "spec.parameterServers.command",
    ),
    Case(
        "ps-without-command",
        with_value(without(ps_job(), "spec.trainer"), "spec.workers.command", ["python", "w.py"]),
        "spec.parameterServers.command",
    ),
    Case("args-without-command", job(workers={"args": ["--fast"]}), "spec.workers.args"),
    Case("bad-quantity", job(workers=resources(limits={"cpu": "1.5x"})), "spec.workers.resources.limits.cpu"),
    Case(
        "negative-quantity",
        job(workers=resources(requests={"memory": -1})),
        "spec.workers.resources.requests.memory",
    ),
    Case(
        "negative-quantity-text",
        job(workers=resources(requests={"memory": "-1Gi"})),
        "spec.workers.resources.requests.memory",
    ),
    Case(
        "fractional-gpu",
        job(workers=resources(limits={"nvidia.com/gpu": "0.5"})),
        "spec.workers.resources.limits",
    ),
    Case(
        "request-over-limit",
        job(workers=resources(requests={"cpu": "2"}, limits={"cpu": "1"})),
        "spec.workers.resources.requests",
    ),
    Case(
        "bad-resource-name",
        job(workers=resources(limits={"nvidia.com/gpu!": 1})),
        "spec.workers.resources.limits",
    ),
    Case("exit-code-zero", job(runPolicy={"permanentExitCodes": [0]}), "spec.runPolicy.permanentExitCodes"),
    Case("exit-code-256", job(runPolicy={"permanentExitCodes": [256]}), "spec.runPolicy.permanentExitCodes"),
    Case(
        "exit-codes-repeated",
        job(runPolicy={"permanentExitCodes": [78, 78]}),
        "spec.runPolicy.permanentExitCodes",
    ),
    Case(
        "exit-codes-without-policy",
        job(runPolicy={"restartPolicy": "OnFailure", "permanentExitCodes": [78]}),
        "spec.runPolicy.permanentExitCodes",
    ),
    Case("restart-policy-unknown", job(runPolicy={"restartPolicy": "Always"}), "spec.runPolicy.restartPolicy"),
    Case("clean-pod-policy-unknown", job(runPolicy={"cleanPodPolicy": "Some"}), "spec.runPolicy.cleanPodPolicy"),
    Case("suspend-wrong-type", job(runPolicy={"suspend": "yes"}), "spec.runPolicy.suspend"),
    Case("backoff-negative", job(runPolicy={"backoffLimit": -1}), "spec.runPolicy.backoffLimit"),
    Case(
        "env-owned-by-operator",
        job(workers={"env": [{"name": "RANK", "value": "0"}]}),
        "spec.workers.env[0].name",
    ),
    Case("env-repeated", job(workers={"env": [{"name": "A"}, {"name": "A"}]}), "spec.workers.env"),
    Case(
        "env-value-and-value-from",
        job(workers={"env": [{**ENV_SECRET, "value": "x"}]}),
        "spec.workers.env[0].valueFrom",
    ),
    Case(
        "mount-without-volume",
        job(workers={"volumeMounts": [{"name": "data", "mountPath": "/data"}]}),
        "spec.workers.volumeMounts",
    ),
    Case(
        "volume-two-sources",
        job(workers={"volumes": [{**PVC_VOLUME, "emptyDir": {}}]}),
        "spec.workers.volumes[0].name",
    ),
    Case(
        "volume-unknown-source",
        job(workers={"volumes": [{"name": "data", "persistentVolumeClam": {"claimName": "x"}}]}),
        "spec.workers.volumes[0].persistentVolumeClam",
    ),
    Case("checkpoint-without-volume", job(checkpoint={"everySteps": 10}), "spec.checkpoint.volume"),
    Case(
        "checkpoint-without-interval",
        job(checkpoint=without(checkpoint(), "everySteps")),
        "spec.checkpoint.everySteps",
    ),
    Case("checkpoint-auto-lower-case", job(checkpoint=checkpoint(everySteps="auto")), "spec.checkpoint.everySteps"),
    Case("checkpoint-every-zero-steps", job(checkpoint=checkpoint(everySteps=0)), "spec.checkpoint.everySteps"),
    Case(
        "checkpoint-auto-and-seconds",
        job(checkpoint=checkpoint(everySteps="Auto", everySeconds=600)),
        "spec.checkpoint.everySeconds",
    ),
    Case("checkpoint-relative-path", job(checkpoint=checkpoint(path="ckpt")), "spec.checkpoint.path"),
    Case(
        "checkpoint-two-volumes",
        job(checkpoint=with_value(checkpoint(), "volume.emptyDir", {})),
        "spec.checkpoint.volume.persistentVolumeClaim",
    ),
    Case("steps-and-epochs", _bad_trainer(epochs=2), "spec.trainer.steps"),
    Case("entrypoint-and-workload", _bad_trainer(entrypoint="m:f", workload="synthetic"), "spec.trainer.workload"),
    Case("entrypoint-and-lr", _bad_trainer(entrypoint="m:f", learningRate=0.1), "spec.trainer.learningRate"),
    Case("entrypoint-and-optimizer", _bad_trainer(entrypoint="m:f", optimizer="adam"), "spec.trainer.optimizer"),
    Case("config-without-entrypoint", _bad_trainer(config={"a": 1}), "spec.trainer.config"),
    Case("entrypoint-without-function", _bad_trainer(entrypoint="train.py"), "spec.trainer.entrypoint"),
    Case("entrypoint-with-spaces", _bad_trainer(entrypoint="my module:f"), "spec.trainer.entrypoint"),
    Case("precision-fp8", _bad_trainer(precision="fp8"), "spec.trainer.precision"),
    Case("accumulation-zero", _bad_trainer(gradientAccumulationSteps=0), "spec.trainer.gradientAccumulationSteps"),
    Case("clip-negative", _bad_trainer(clipGradNorm=-1.0), "spec.trainer.clipGradNorm"),
    Case("momentum-with-adam", _bad_trainer(optimizer="adam", momentum=0.9), "spec.trainer.momentum"),
    Case("workload-unknown", _bad_trainer(workload="imagenet"), "spec.trainer.workload"),
    Case("learning-rate-zero", _bad_trainer(learningRate=0), "spec.trainer.learningRate"),
    Case("learning-rate-text", _bad_trainer(learningRate="0.1"), "spec.trainer.learningRate"),
    Case(
        "async-checkpoint-without-checkpoint",
        _bad_trainer(asyncCheckpoint=True),
        "spec.trainer.asyncCheckpoint",
    ),
    Case("min-available-over-pods", job(scheduling={"minAvailable": 3}), "spec.scheduling.minAvailable"),
    Case(
        "toleration-exists-with-value",
        job(workers={"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}),
        "spec.workers.tolerations[0].value",
    ),
    Case("image-with-space", job(workers={"image": "trainer latest"}), "spec.workers.image"),
    Case(
        "affinity-unknown-key",
        job(workers={"affinity": {"nodeAfinity": {}}}),
        "spec.workers.affinity.nodeAfinity",
    ),
    Case("name-too-long", job(name="a" * 41), "metadata.name"),
    Case(
        "volume-name-reserved",
        command_job(volumes=[{"name": "tj-key", "emptyDir": {}}]),
        "spec.workers.volumes[0].name",
    ),
    Case(
        "mount-over-the-key",
        command_job(
            volumes=[{"name": "v", "emptyDir": {}}], volumeMounts=[{"name": "v", "mountPath": "/var/run/trainingjob"}]
        ),
        "spec.workers.volumeMounts[0].mountPath",
    ),
    Case(
        "mount-over-the-checkpoint",
        with_value(
            command_job(volumes=[{"name": "v", "emptyDir": {}}], volumeMounts=[{"name": "v", "mountPath": "/ckpt"}]),
            "spec.checkpoint",
            checkpoint(path="/ckpt"),
        ),
        "spec.workers.volumeMounts",
    ),
    Case(
        "extended-request-without-limit",
        job(workers=resources(requests={"example.com/fpga": 1})),
        "spec.workers.resources.requests",
    ),
    Case(
        "extended-request-below-limit",
        job(workers=resources(requests={"nvidia.com/gpu": 1}, limits={"nvidia.com/gpu": 2})),
        "spec.workers.resources.requests",
    ),
    Case(
        "extended-fraction-hidden-by-limit",
        job(workers=resources(requests={"example.com/fpga": "500m"}, limits={"example.com/fpga": 1})),
        "spec.workers.resources",
    ),
    Case("label-name-64", job(workers={"nodeSelector": {"a" * 64: "x"}}), "spec.workers.nodeSelector"),
    Case("snake-case-field", job(run_policy={"backoffLimit": 2}), "spec.run_policy"),
    Case("snake-case-nested", job(workers={"replicas": 1, "node_selector": {"a": "b"}}), "spec.workers.node_selector"),
    Case("root-while-non-root", job(workers={"securityContext": {"runAsUser": 0}}), "spec.workers.securityContext"),
    Case(
        "negative-user", job(workers={"securityContext": {"runAsUser": -1}}), "spec.workers.securityContext.runAsUser"
    ),
    Case(
        "capability-lowercase",
        job(workers={"securityContext": {"addCapabilities": ["net_admin"]}}),
        "spec.workers.securityContext.addCapabilities[0]",
    ),
    Case(
        "capability-twice",
        job(workers={"securityContext": {"addCapabilities": ["IPC_LOCK", "IPC_LOCK"]}}),
        "spec.workers.securityContext.addCapabilities",
    ),
    Case(
        "seccomp-unknown",
        job(workers={"securityContext": {"seccompProfile": "Localhost"}}),
        "spec.workers.securityContext.seccompProfile",
    ),
    Case(
        "configmap-item-climbs-out",
        command_job(volumes=[{"name": "cfg", "configMap": {"name": "c", "items": [{"key": "k", "path": "../x"}]}}]),
        "spec.workers.volumes[0].configMap.items[0].path",
    ),
    Case(
        "configmap-item-climbs-out-midway",
        command_job(
            volumes=[{"name": "cfg", "configMap": {"name": "c", "items": [{"key": "k", "path": "a/../../x"}]}}]
        ),
        "spec.workers.volumes[0].configMap.items[0].path",
    ),
    Case(
        "env-from-two-sources",
        job(workers={"envFrom": [{"configMapRef": {"name": "a"}, "secretRef": {"name": "b"}}]}),
        "spec.workers.envFrom[0].configMapRef",
    ),
    Case(
        "env-from-operator-prefix",
        job(workers={"envFrom": [{"configMapRef": {"name": "a"}, "prefix": "TJ_"}]}),
        "spec.workers.envFrom[0].prefix",
    ),
    Case(
        "init-named-trainer",
        command_job(initContainers=[sidecar(name="trainer")]),
        "spec.workers.initContainers[0].name",
    ),
    Case(
        "init-name-not-dns", command_job(initContainers=[sidecar(name="Fetch")]), "spec.workers.initContainers[0].name"
    ),
    Case(
        "init-without-image",
        command_job(initContainers=[{"name": "fetch"}]),
        "spec.workers.initContainers[0].image",
    ),
    Case(
        "sidecar-env-owned-by-operator",
        command_job(sidecars=[sidecar(env=[{"name": "TJ_JOB_NAME", "value": "x"}])]),
        "spec.workers.sidecars[0].env[0].name",
    ),
    Case("init-repeated", command_job(initContainers=[sidecar(), sidecar()]), "spec.workers.initContainers"),
    Case(
        "sidecar-named-like-init",
        command_job(initContainers=[sidecar()], sidecars=[sidecar()]),
        "spec.workers.sidecars",
    ),
    Case(
        "init-mount-without-volume",
        command_job(initContainers=[sidecar(volumeMounts=[{"name": "data", "mountPath": "/data"}])]),
        "spec.workers.initContainers",
    ),
    Case(
        "sidecar-mount-without-volume",
        command_job(sidecars=[sidecar(volumeMounts=[{"name": "data", "mountPath": "/data"}])]),
        "spec.workers.sidecars",
    ),
    Case(
        "sidecar-root-while-non-root",
        command_job(sidecars=[sidecar(securityContext={"runAsUser": 0})]),
        "spec.workers.sidecars[0].securityContext.runAsUser",
    ),
    Case(
        "mount-over-shm",
        command_job(volumes=[DATA_VOLUME], volumeMounts=[{"name": "data", "mountPath": "/dev/shm"}]),
        "spec.workers.volumeMounts[0].mountPath",
    ),
    Case(
        "sidecar-mount-over-shm",
        command_job(
            volumes=[DATA_VOLUME], sidecars=[sidecar(volumeMounts=[{"name": "data", "mountPath": "/dev/shm/x"}])]
        ),
        "spec.workers.sidecars[0].volumeMounts[0].mountPath",
    ),
    *(
        Case(
            f"{name}-mount-over-the-checkpoint",
            with_value(
                command_job(
                    volumes=[DATA_VOLUME], **{kind: [sidecar(volumeMounts=[{"name": "data", "mountPath": "/ckpt"}])]}
                ),
                "spec.checkpoint",
                checkpoint(path="/ckpt"),
            ),
            f"spec.workers.{kind}",
        )
        for name, kind in (("init", "initContainers"), ("sidecar", "sidecars"))
    ),
    Case("checkpoint-at-shm", job(checkpoint=checkpoint(path="/dev/shm")), "spec.checkpoint.path"),
    Case(
        "pod-label-operator-owned",
        job(workers={"podMetadata": {"labels": {"trainingjob.io/role": "ps"}}}),
        "spec.workers.podMetadata.labels",
    ),
    Case(
        "pod-label-kueue-queue",
        job(workers={"podMetadata": {"labels": {"kueue.x-k8s.io/queue-name": "other"}}}),
        "spec.workers.podMetadata.labels",
    ),
    Case(
        "pod-annotation-operator-owned",
        job(workers={"podMetadata": {"annotations": {"scheduling.k8s.io/group-name": "other"}}}),
        "spec.workers.podMetadata.annotations",
    ),
    Case(
        "pod-label-bad-value",
        job(workers={"podMetadata": {"labels": {"team": "a b"}}}),
        "spec.workers.podMetadata.labels",
    ),
    Case("runtime-class-not-dns", job(workers={"runtimeClassName": "Nvidia_GPU"}), "spec.workers.runtimeClassName"),
    Case(
        "pull-secret-repeated",
        job(workers={"imagePullSecrets": [{"name": "reg"}, {"name": "reg"}]}),
        "spec.workers.imagePullSecrets",
    ),
    Case(
        "spread-min-domains-anyway",
        job(
            workers={"topologySpreadConstraints": [{**SPREAD, "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 2}]}
        ),
        "spec.workers.topologySpreadConstraints[0].minDomains",
    ),
    Case(
        "spread-repeated",
        job(workers={"topologySpreadConstraints": [SPREAD, {**SPREAD, "maxSkew": 2}]}),
        "spec.workers.topologySpreadConstraints",
    ),
    Case(
        "spread-skew-zero",
        job(workers={"topologySpreadConstraints": [{**SPREAD, "maxSkew": 0}]}),
        "spec.workers.topologySpreadConstraints[0].maxSkew",
    ),
    Case(
        "selector-in-without-values",
        job(
            workers={
                "topologySpreadConstraints": [
                    {**SPREAD, "labelSelector": {"matchExpressions": [{"key": "team", "operator": "In"}]}}
                ]
            }
        ),
        "spec.workers.topologySpreadConstraints[0].labelSelector.matchExpressions[0].values",
    ),
    Case("shm-zero", job(workers={"shmSize": "0"}), "spec.workers.shmSize"),
    Case(
        "supplemental-groups-repeated",
        job(workers={"securityContext": {"supplementalGroups": [5, 5]}}),
        "spec.workers.securityContext.supplementalGroups",
    ),
    Case(
        "grace-period-a-week",
        job(workers={"terminationGracePeriodSeconds": 604800}),
        "spec.workers.terminationGracePeriodSeconds",
    ),
]

CASES = VALID + INVALID


def error_path(location: tuple[int | str, ...]) -> str:
    """A pydantic error location written like the apiserver writes field paths: spec.workers.env[0].name."""
    path = ""
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path.lstrip(".")


def names_field(path: str, field: str) -> bool:
    """True when the error `path` is the expected `field` or lies below it."""
    return path == field or path.startswith((f"{field}.", f"{field}["))


def pydantic_error_paths(error: ValidationError) -> list[str]:
    return [error_path(tuple(detail["loc"])) for detail in error.errors()]
