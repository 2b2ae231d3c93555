"""Pod fields the model once passed to the pods unchecked (affinity, csi, ephemeral, projected and downwardAPI
volumes, huge pages, owner references), each written once as the fragment a user writes: the TrainingJob that
carries it (for the model and the CRD) and a bare Pod that carries it (for the apiserver's own pod validation,
the proof of what a pod refuses) are both made from it."""

from dataclasses import dataclass
from typing import Any

from tests.support.corpus_trainingjob import Case, Manifest, command_job, job, resources

from trainingjob.children.naming import CONTAINER_NAME

# Where a fragment goes: (wire path of it in a TrainingJob, in a Pod).
_PLACES = {
    "volume": ("spec.workers.volumes[0]", "spec.volumes[0]"),
    "affinity": ("spec.workers.affinity", "spec.affinity"),
    "resources": ("spec.workers.resources", "spec.containers[0].resources"),
    "owners": ("metadata.ownerReferences", "metadata.ownerReferences"),
}


@dataclass(frozen=True)
class PodCase:
    """A fragment at `place` (volume, affinity, resources or owners); `field` is the path below it that the
    refusal names ("" for the fragment itself), None when a pod takes it."""

    id: str
    place: str
    fragment: Any
    field: str | None = None

    @property
    def case(self) -> Case:
        prefix = _PLACES[self.place][0]
        field = None if self.field is None else prefix + (f".{self.field}" if self.field else "")
        return Case(self.id, self._job(), field)

    def _job(self) -> Manifest:
        if self.place == "volume":
            return command_job(volumes=[{"name": "data", **self.fragment}])
        if self.place == "affinity":
            return job(workers={"replicas": 2, "affinity": self.fragment})
        if self.place == "resources":
            return job(workers=resources(**self.fragment))
        manifest = job()
        manifest["metadata"]["ownerReferences"] = self.fragment
        return manifest

    def pod(self) -> Manifest:
        """A bare Pod with the fragment, its container named as the operator names the trainer's."""
        container: dict[str, Any] = {"name": CONTAINER_NAME, "image": "busybox"}
        spec: dict[str, Any] = {"containers": [container]}
        metadata: dict[str, Any] = {"name": "corpus"}
        if self.place == "volume":
            spec["volumes"] = [{"name": "data", **self.fragment}]
        elif self.place == "affinity":
            spec["affinity"] = self.fragment
        elif self.place == "resources":
            container["resources"] = self.fragment
        else:
            metadata["ownerReferences"] = self.fragment
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def _required_nodes(*expressions: dict[str, Any], fields: list[Any] | None = None) -> dict[str, Any]:
    term: dict[str, Any] = {"matchExpressions": list(expressions)} if expressions else {}
    term |= {"matchFields": fields} if fields else {}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def _anti(**term: Any) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def _claim(**spec: Any) -> dict[str, Any]:
    base = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    return {"ephemeral": {"volumeClaimTemplate": {"spec": {**base, **spec}}}}


def _projected(*sources: dict[str, Any], **settings: Any) -> dict[str, Any]:
    return {"projected": {"sources": list(sources), **settings}}


def _downward(**item: Any) -> dict[str, Any]:
    return {"downwardAPI": {"items": [item]}}


_GPU = {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["H100"]}
_HOST = "kubernetes.io/hostname"
_APP = {"matchLabels": {"app": "train"}}
_NODES = "nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
_TERM = f"{_NODES}[0].matchExpressions[0]"
_ANTI = "podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
_CLAIM = "ephemeral.volumeClaimTemplate"
_LABELS = {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}
_MEMORY = {"path": "memory", "resourceFieldRef": {"containerName": CONTAINER_NAME, "resource": "limits.memory"}}
_TOKEN = {"serviceAccountToken": {"audience": "vault", "expirationSeconds": 3600, "path": "token"}}
_OWNER = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "name": "nightly", "uid": "0a1b2c3d"}

POD_VALID = [
    PodCase("affinity-node-gpu-type", "affinity", _required_nodes(_GPU)),
    PodCase(
        "affinity-node-name-field",
        "affinity",
        _required_nodes(fields=[{"key": "metadata.name", "operator": "In", "values": ["gpu-node-0"]}]),
    ),
    PodCase(
        "affinity-node-preferred-no-preference",
        "affinity",
        {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10}]}},
    ),
    PodCase(
        "affinity-pod-anti-hostname",
        "affinity",
        _anti(labelSelector=_APP, topologyKey=_HOST, matchLabelKeys=["pod-template-hash"]),
    ),
    PodCase(
        "csi-secrets-store",
        "volume",
        {
            "csi": {
                "driver": "secrets-store.csi.k8s.io",
                "readOnly": True,
                "volumeAttributes": {"secretProviderClass": "vault"},
                "nodePublishSecretRef": {"name": "vault-creds"},
            }
        },
    ),
    PodCase("csi-driver-upper-case", "volume", {"csi": {"driver": "Example.COM"}}),
    PodCase("ephemeral-scratch", "volume", _claim(storageClassName="", volumeMode="Filesystem")),
    PodCase(
        "ephemeral-from-snapshot",
        "volume",
        _claim(dataSource={"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "data"}),
    ),
    PodCase(
        "projected-four-sources",
        "volume",
        _projected(
            {"secret": {"name": "s", "items": [{"key": "k", "path": "a"}]}},
            {"configMap": {"name": "c"}},
            {"downwardAPI": {"items": [_LABELS]}},
            _TOKEN,
        ),
    ),
    PodCase("projected-no-sources", "volume", {"projected": {}}),
    PodCase("downward-labels-and-memory", "volume", {"downwardAPI": {"items": [_LABELS, _MEMORY]}}),
    PodCase(
        "downward-one-label",
        "volume",
        _downward(path="team", fieldRef={"fieldPath": "metadata.labels['example.com/team']"}),
    ),
    PodCase("owners-workflow", "owners", [{**_OWNER, "controller": True, "blockOwnerDeletion": True}]),
    PodCase("hugepages-1Gi-beside-cpu", "resources", {"limits": {"hugepages-1Gi": "2Gi", "cpu": "1"}}),
    PodCase(
        "hugepages-requests-equal-limits",
        "resources",
        {"requests": {"hugepages-2Mi": "4Mi", "memory": "1Gi"}, "limits": {"hugepages-2Mi": "4Mi", "memory": "1Gi"}},
    ),
    PodCase("hugepages-none", "resources", {"limits": {"hugepages-2Mi": "0", "memory": "1Gi"}}),
]

POD_INVALID = [
    PodCase(
        "affinity-node-no-terms",
        "affinity",
        {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}},
        _NODES,
    ),
    PodCase(
        "affinity-node-operator-lower-case",
        "affinity",
        _required_nodes({**_GPU, "operator": "in"}),
        f"{_TERM}.operator",
    ),
    PodCase(
        "affinity-node-in-without-values",
        "affinity",
        _required_nodes({"key": "a", "operator": "In"}),
        f"{_TERM}.values",
    ),
    PodCase(
        "affinity-node-exists-with-values",
        "affinity",
        _required_nodes({"key": "a", "operator": "Exists", "values": ["x"]}),
        f"{_TERM}.values",
    ),
    PodCase(
        "affinity-node-gt-two-values",
        "affinity",
        _required_nodes({"key": "a", "operator": "Gt", "values": ["1", "2"]}),
        f"{_TERM}.values",
    ),
    PodCase(
        "affinity-node-key-space",
        "affinity",
        _required_nodes({"key": "gpu type", "operator": "Exists"}),
        f"{_TERM}.key",
    ),
    PodCase("affinity-node-value-space", "affinity", _required_nodes({**_GPU, "values": ["H 100"]}), f"{_TERM}.values"),
    PodCase(
        "affinity-node-field-not-name",
        "affinity",
        _required_nodes(fields=[{"key": "metadata.labels", "operator": "In", "values": ["x"]}]),
        f"{_NODES}[0].matchFields[0].key",
    ),
    PodCase(
        "affinity-node-field-two-names",
        "affinity",
        _required_nodes(fields=[{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]),
        f"{_NODES}[0].matchFields[0].values",
    ),
    PodCase(
        "affinity-node-weight-zero",
        "affinity",
        {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0, "preference": {}}]}},
        "nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
    ),
    PodCase("affinity-node-misspelt", "affinity", {"nodeAffinity": {"required": {}}}, "nodeAffinity.required"),
    PodCase("affinity-pod-no-topology-key", "affinity", _anti(labelSelector=_APP), f"{_ANTI}.topologyKey"),
    PodCase(
        "affinity-pod-topology-key-space",
        "affinity",
        _anti(labelSelector=_APP, topologyKey="host name"),
        f"{_ANTI}.topologyKey",
    ),
    PodCase(
        "affinity-pod-selector-value-space",
        "affinity",
        _anti(labelSelector={"matchLabels": {"app": "my app"}}, topologyKey=_HOST),
        f"{_ANTI}.labelSelector.matchLabels",
    ),
    PodCase(
        "affinity-pod-selector-gt",
        "affinity",
        _anti(
            labelSelector={"matchExpressions": [{"key": "app", "operator": "Gt", "values": ["1"]}]}, topologyKey=_HOST
        ),
        f"{_ANTI}.labelSelector.matchExpressions[0].operator",
    ),
    PodCase(
        "affinity-pod-namespace-upper-case",
        "affinity",
        _anti(labelSelector=_APP, namespaces=["Team_A"], topologyKey=_HOST),
        f"{_ANTI}.namespaces",
    ),
    PodCase(
        "affinity-pod-match-label-keys-without-selector",
        "affinity",
        _anti(matchLabelKeys=["pod-template-hash"], topologyKey=_HOST),
        f"{_ANTI}.matchLabelKeys",
    ),
    PodCase(
        "affinity-pod-preferred-without-term",
        "affinity",
        {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10}]}},
        "podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm",
    ),
    PodCase("csi-without-driver", "volume", {"csi": {"readOnly": True}}, "csi.driver"),
    PodCase("csi-driver-underscore", "volume", {"csi": {"driver": "my_driver"}}, "csi.driver"),
    PodCase("csi-driver-too-long", "volume", {"csi": {"driver": "d" * 64}}, "csi.driver"),
    PodCase(
        "csi-secret-without-name",
        "volume",
        {"csi": {"driver": "d.io", "nodePublishSecretRef": {}}},
        "csi.nodePublishSecretRef.name",
    ),
    PodCase("ephemeral-without-template", "volume", {"ephemeral": {}}, _CLAIM),
    PodCase("ephemeral-without-access-modes", "volume", _claim(accessModes=[]), f"{_CLAIM}.spec.accessModes"),
    PodCase("ephemeral-access-mode-typo", "volume", _claim(accessModes=["ReadWriteOne"]), f"{_CLAIM}.spec.accessModes"),
    PodCase(
        "ephemeral-once-pod-with-others",
        "volume",
        _claim(accessModes=["ReadWriteOncePod", "ReadWriteOnce"]),
        f"{_CLAIM}.spec.accessModes",
    ),
    PodCase(
        "ephemeral-without-size",
        "volume",
        _claim(resources={"requests": {"cpu": "1"}}),
        f"{_CLAIM}.spec.resources.requests",
    ),
    PodCase(
        "ephemeral-size-zero",
        "volume",
        _claim(resources={"requests": {"storage": "0"}}),
        f"{_CLAIM}.spec.resources.requests",
    ),
    PodCase(
        "ephemeral-storage-class-underscore",
        "volume",
        _claim(storageClassName="fast_ssd"),
        f"{_CLAIM}.spec.storageClassName",
    ),
    PodCase("ephemeral-volume-mode-lower-case", "volume", _claim(volumeMode="block"), f"{_CLAIM}.spec.volumeMode"),
    PodCase(
        "ephemeral-data-source-without-kind",
        "volume",
        _claim(dataSource={"name": "snap"}),
        f"{_CLAIM}.spec.dataSource.kind",
    ),
    PodCase(
        "ephemeral-claim-named",
        "volume",
        {
            "ephemeral": {
                "volumeClaimTemplate": {**_claim()["ephemeral"]["volumeClaimTemplate"], "metadata": {"name": "scratch"}}
            }
        },
        f"{_CLAIM}.metadata.name",
    ),
    PodCase(
        "projected-two-sources-in-one",
        "volume",
        _projected({"secret": {"name": "s"}, "configMap": {"name": "c"}}),
        "projected.sources[0]",
    ),
    PodCase("projected-secret-without-name", "volume", _projected({"secret": {}}), "projected.sources[0].secret.name"),
    PodCase(
        "projected-token-short-lived",
        "volume",
        _projected({"serviceAccountToken": {"path": "token", "expirationSeconds": 60}}),
        "projected.sources[0].serviceAccountToken.expirationSeconds",
    ),
    PodCase(
        "projected-token-absolute-path",
        "volume",
        _projected({"serviceAccountToken": {"path": "/token"}}),
        "projected.sources[0].serviceAccountToken.path",
    ),
    PodCase(
        "projected-token-dot-dot-path",
        "volume",
        _projected({"serviceAccountToken": {"path": "..token"}}),
        "projected.sources[0].serviceAccountToken.path",
    ),
    PodCase(
        "projected-item-climbs-out",
        "volume",
        _projected({"secret": {"name": "s", "items": [{"key": "k", "path": "../k"}]}}),
        "projected.sources[0].secret.items[0].path",
    ),
    PodCase(
        "projected-mode-negative",
        "volume",
        _projected({"secret": {"name": "s"}}, defaultMode=-1),
        "projected.defaultMode",
    ),
    PodCase(
        "downward-without-path",
        "volume",
        _downward(fieldRef={"fieldPath": "metadata.name"}),
        "downwardAPI.items[0].path",
    ),
    PodCase(
        "downward-pod-ip",
        "volume",
        _downward(path="ip", fieldRef={"fieldPath": "status.podIP"}),
        "downwardAPI.items[0].fieldRef.fieldPath",
    ),
    PodCase(
        "downward-both-refs",
        "volume",
        _downward(**_LABELS, resourceFieldRef=_MEMORY["resourceFieldRef"]),
        "downwardAPI.items[0].fieldRef",
    ),
    PodCase("downward-neither-ref", "volume", _downward(path="a"), "downwardAPI.items[0].fieldRef"),
    PodCase(
        "downward-resource-without-container",
        "volume",
        _downward(path="m", resourceFieldRef={"resource": "limits.memory"}),
        "downwardAPI.items[0].resourceFieldRef.containerName",
    ),
    PodCase(
        "downward-resource-gpu",
        "volume",
        _downward(path="g", resourceFieldRef={"containerName": CONTAINER_NAME, "resource": "limits.nvidia.com/gpu"}),
        "downwardAPI.items[0].resourceFieldRef.resource",
    ),
    PodCase(
        "downward-kubelet-data-path", "volume", _downward(**{**_LABELS, "path": "..data"}), "downwardAPI.items[0].path"
    ),
    PodCase(
        "configmap-kubelet-data-path",
        "volume",
        {"configMap": {"name": "c", "items": [{"key": "k", "path": "..data"}]}},
        "configMap.items[0].path",
    ),
    PodCase("owners-without-uid", "owners", [{k: v for k, v in _OWNER.items() if k != "uid"}], ""),
    PodCase("owners-empty-kind", "owners", [{**_OWNER, "kind": ""}], ""),
    PodCase("owners-api-version-three-parts", "owners", [{**_OWNER, "apiVersion": "a/b/c"}], ""),
    PodCase(
        "owners-two-controllers",
        "owners",
        [{**_OWNER, "controller": True}, {**_OWNER, "name": "other", "uid": "4e5f", "controller": True}],
        "",
    ),
    PodCase("owners-namespace", "owners", [{**_OWNER, "namespace": "team-b"}], ""),
    PodCase("hugepages-alone", "resources", {"limits": {"hugepages-2Mi": "4Mi"}}, "limits"),
    PodCase(
        "hugepages-beside-disk-only",
        "resources",
        {"limits": {"hugepages-2Mi": "4Mi", "ephemeral-storage": "1Gi"}},
        "limits",
    ),
    PodCase(
        "hugepages-request-below-limit",
        "resources",
        {"requests": {"hugepages-2Mi": "2Mi"}, "limits": {"hugepages-2Mi": "4Mi", "memory": "1Gi"}},
        "requests",
    ),
    PodCase(
        "hugepages-request-without-limit",
        "resources",
        {"requests": {"hugepages-2Mi": "2Mi", "memory": "1Gi"}},
        "requests",
    ),
    PodCase("hugepages-part-of-a-page", "resources", {"limits": {"hugepages-2Mi": "3Mi", "memory": "1Gi"}}, "limits"),
    PodCase(
        "hugepages-size-not-a-quantity", "resources", {"limits": {"hugepages-big": "4Mi", "memory": "1Gi"}}, "limits"
    ),
    PodCase(
        "hugepages-size-fraction-of-a-byte", "resources", {"limits": {"hugepages-500m": "1", "memory": "1Gi"}}, "limits"
    ),
]

POD_CASES = POD_VALID + POD_INVALID
