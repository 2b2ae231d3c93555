"""TrainingJobs a hostile tenant with only `create trainingjobs` would write to get more than its own pods: root on
the node, another job's key, the control plane. Each is valid to the CRD (the apiserver would store it); the chart's
tenancy policy must refuse it with its defaults, naming the field. Near misses beside them are what honest jobs
write, and must pass."""

from typing import Any

from tests.support.corpus_trainingjob import Case, checkpoint, command_job, job, sidecar, with_value

Manifest = dict[str, Any]
OTHER_JOBS_KEY = "victim-key-0123456789ab"  # how the operator names a job's key Secret: <job>-key-<12 hex of its uid>
CONTROL_PLANE = "node-role.kubernetes.io/control-plane"
APPARMOR = "container.apparmor.security.beta.kubernetes.io/trainer"


def _security(**context: Any) -> Manifest:
    return command_job(securityContext=context)


def _sidecar_security(**context: Any) -> Manifest:
    return command_job(sidecars=[sidecar(securityContext=context)])


def _csi_secret(name: str) -> dict[str, Any]:
    """A csi volume whose driver is given the Secret `name` (nodePublishSecretRef) to mount with."""
    return {"name": "k", "csi": {"driver": "secrets-store.csi.k8s.io", "nodePublishSecretRef": {"name": name}}}


def _env_secret(name: str) -> dict[str, Any]:
    return {"name": "STOLEN", "valueFrom": {"secretKeyRef": {"name": name, "key": "key"}}}


def _host_path(path: str, *, read_only: bool = True) -> Manifest:
    mount = {"name": "host", "mountPath": "/host", "readOnly": read_only}
    return command_job(volumes=[{"name": "host", "hostPath": {"path": path}}], volumeMounts=[mount])


def _required_affinity(key: str, operator: str) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": key, "operator": operator}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def _preferred_affinity(key: str) -> dict[str, Any]:
    preference = {"matchExpressions": [{"key": key, "operator": "Exists"}]}
    return {
        "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": preference}]}
    }


HOSTILE = [
    Case("root-user", _security(runAsUser=0, runAsNonRoot=False), "spec.workers.securityContext.runAsNonRoot"),
    Case("root-allowed", _security(runAsNonRoot=False), "spec.workers.securityContext.runAsNonRoot"),
    Case(
        "root-sidecar",
        _sidecar_security(runAsUser=0, runAsNonRoot=False),
        "spec.workers.securityContext.runAsNonRoot",
    ),
    Case(
        "root-init-container",
        command_job(initContainers=[sidecar(securityContext={"runAsUser": 0, "runAsNonRoot": False})]),
        "spec.workers.securityContext.runAsNonRoot",
    ),
    Case(
        "privilege-escalation",
        _security(allowPrivilegeEscalation=True),
        "spec.workers.securityContext.allowPrivilegeEscalation",
    ),
    Case("add-sys-admin", _security(addCapabilities=["SYS_ADMIN"]), "spec.workers.securityContext.addCapabilities"),
    Case("add-all", _security(addCapabilities=["ALL"]), "spec.workers.securityContext.addCapabilities"),
    Case(
        "sidecar-net-admin",
        _sidecar_security(addCapabilities=["NET_ADMIN"]),
        "spec.workers.securityContext.addCapabilities",
    ),
    Case("seccomp-unconfined", _security(seccompProfile="Unconfined"), "spec.workers.securityContext.seccompProfile"),
    Case(
        "apparmor-unconfined",
        command_job(podMetadata={"annotations": {APPARMOR: "unconfined"}}),
        "spec.workers.podMetadata.annotations",
    ),
    Case(
        "seccomp-annotation",
        command_job(podMetadata={"annotations": {"seccomp.security.alpha.kubernetes.io/pod": "unconfined"}}),
        "spec.workers.podMetadata.annotations",
    ),
    Case("tolerate-everything", command_job(tolerations=[{"operator": "Exists"}]), "spec.workers.tolerations"),
    Case(
        "tolerate-every-no-schedule",
        command_job(tolerations=[{"operator": "Exists", "effect": "NoSchedule"}]),
        "spec.workers.tolerations",
    ),
    Case(
        "tolerate-control-plane",
        command_job(tolerations=[{"key": CONTROL_PLANE, "operator": "Exists", "effect": "NoSchedule"}]),
        "spec.workers.tolerations",
    ),
    Case("select-control-plane", command_job(nodeSelector={CONTROL_PLANE: ""}), "spec.workers.nodeSelector"),
    Case(
        "select-master",
        command_job(nodeSelector={"node-role.kubernetes.io/master": ""}),
        "spec.workers.nodeSelector",
    ),
    Case(
        "require-control-plane",
        command_job(affinity=_required_affinity(CONTROL_PLANE, "Exists")),
        "spec.workers.affinity.nodeAffinity",
    ),
    Case(
        "prefer-control-plane",
        command_job(affinity=_preferred_affinity(CONTROL_PLANE)),
        "spec.workers.affinity.nodeAffinity",
    ),
    Case("node-critical", command_job(priorityClassName="system-node-critical"), "spec.workers.priorityClassName"),
    Case(
        "cluster-critical-for-the-job",
        job(scheduling={"priorityClassName": "system-cluster-critical"}),
        "spec.scheduling.priorityClassName",
    ),
    Case("other-jobs-key-env", command_job(env=[_env_secret(OTHER_JOBS_KEY)]), "spec.workers.env"),
    Case(
        "other-jobs-key-env-from",
        command_job(envFrom=[{"secretRef": {"name": OTHER_JOBS_KEY}}]),
        "spec.workers.env",
    ),
    Case(
        "other-jobs-key-in-a-sidecar",
        command_job(sidecars=[sidecar(env=[_env_secret(OTHER_JOBS_KEY)])]),
        "spec.workers.env",
    ),
    Case(
        "other-jobs-key-volume",
        command_job(volumes=[{"name": "k", "secret": {"secretName": OTHER_JOBS_KEY}}]),
        "spec.workers.volumes",
    ),
    Case(
        "other-jobs-key-projected",
        command_job(volumes=[{"name": "k", "projected": {"sources": [{"secret": {"name": OTHER_JOBS_KEY}}]}}]),
        "spec.workers.volumes",
    ),
    Case(
        "other-jobs-key-for-a-csi-driver",
        command_job(volumes=[_csi_secret(OTHER_JOBS_KEY)]),
        "spec.workers.volumes",
    ),
    Case("host-root", _host_path("/"), "spec.workers.volumes"),
    Case("host-etc", _host_path("/etc"), "spec.workers.volumes"),
    Case(
        "host-checkpoint",
        job(checkpoint=checkpoint(volume={"hostPath": {"path": "/var/lib/kubelet"}})),
        "spec.checkpoint.volume",
    ),
    Case(
        "ps-root",
        with_value(
            job(mode="ParameterServer", parameterServers={"replicas": 1}),
            "spec.parameterServers.securityContext",
            {"runAsUser": 0, "runAsNonRoot": False},
        ),
        "spec.parameterServers.securityContext.runAsNonRoot",
    ),
]
"""Refused by the default policy, naming the field."""

HONEST = [
    Case("gpu-toleration", command_job(tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}])),
    Case("avoid-control-plane", command_job(affinity=_required_affinity(CONTROL_PLANE, "DoesNotExist"))),
    Case("bind-low-port", _security(addCapabilities=["NET_BIND_SERVICE"])),
    Case(
        "apparmor-runtime-default",
        command_job(podMetadata={"annotations": {APPARMOR: "runtime/default"}}),
    ),
    Case("own-secret", command_job(env=[_env_secret("hf-token")], envFrom=[{"secretRef": {"name": "wandb"}}])),
    Case("secret-named-like-a-key", command_job(volumes=[{"name": "k", "secret": {"secretName": "ssh-key-pair"}}])),
    Case(
        "csi-with-its-own-secret",
        command_job(volumes=[_csi_secret("vault-creds")]),
    ),
    Case("own-priority", command_job(priorityClassName="training-high")),
    Case("other-user", _security(runAsUser=2000, runAsGroup=2000)),
]
"""Admitted by the default policy."""

PREFIXED = [
    Case("under-the-prefix", _host_path("/mnt/datasets/imagenet")),
    Case("the-prefix-itself", _host_path("/mnt/datasets")),
    Case("beside-the-prefix", _host_path("/mnt/datasets-private"), "spec.workers.volumes"),
    Case("writable", _host_path("/mnt/datasets/imagenet", read_only=False), "spec.workers.volumeMounts"),
    Case(
        "writable-in-a-sidecar",
        command_job(
            volumes=[{"name": "host", "hostPath": {"path": "/mnt/datasets/x"}}],
            sidecars=[sidecar(volumeMounts=[{"name": "host", "mountPath": "/host"}])],
        ),
        "spec.workers.volumeMounts",
    ),
]
"""Judged with hostPath allowed under /mnt/datasets/: path boundaries and read-only mounts (a path with a '..'
element is refused by the CRD itself: tests/support/corpus_admission.py)."""
