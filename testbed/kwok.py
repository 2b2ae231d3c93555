"""kwok for the cluster tier: the stages that move fake nodes and pods along, and the fake GPU nodes."""

from typing import Any

GPU_RESOURCE = "nvidia.com/gpu"
NODE_ANNOTATION = "kwok.x-k8s.io/node"
# Annotations a pod (or a TrainingJob's pod template) may carry to end on its own after it starts running.
EXIT_CODE_ANNOTATION = "sim.trainingjob.io/exit-code"
RUN_FOR_ANNOTATION = "sim.trainingjob.io/run-for"  # a Go duration such as "2s"; default 1s
EXIT_REASON_ANNOTATION = "sim.trainingjob.io/reason"  # default Completed for 0, Error otherwise

_POD_FILTER = """
    - key: '.metadata.deletionTimestamp'
      operator: DoesNotExist"""

# kwok's stages move nodes and pods along as a kubelet would, and leave finalizers to their owners (kwok's own
# stages remove them all). No stage deletes a pod: kwok's delete names the pod alone, so one that lagged could reach
# a pod created since under the same name. testbed/kwok_deletes.py confirms deletions instead, naming the UID.
STAGES = f"""
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-ready
spec:
  resourceRef: {{apiGroup: v1, kind: Node}}
  selector:
    matchExpressions:
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: NotIn
      values: ['True']
  next:
    statusTemplate: |
      conditions:
      {{{{ range list "MemoryPressure" "DiskPressure" "PIDPressure" }}}}
      - type: {{{{ . }}}}
        status: "False"
        reason: NoPressure
        message: simulated node has no pressure
        lastHeartbeatTime: {{{{ Now | Quote }}}}
        lastTransitionTime: {{{{ Now | Quote }}}}
      {{{{ end }}}}
      - type: Ready
        status: "True"
        reason: KubeletReady
        message: simulated node is ready
        lastHeartbeatTime: {{{{ Now | Quote }}}}
        lastTransitionTime: {{{{ Now | Quote }}}}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-running
spec:
  resourceRef: {{apiGroup: v1, kind: Pod}}
  selector:
    matchExpressions:{_POD_FILTER}
    - key: '.spec.nodeName'
      operator: Exists
    - key: '.status.phase'
      operator: In
      values: [Pending]
  next:
    statusTemplate: |
      phase: Running
      startTime: {{{{ Now | Quote }}}}
      hostIP: {{{{ NodeIPWith .spec.nodeName | Quote }}}}
      podIP: {{{{ PodIPWith .spec.nodeName false .metadata.uid .metadata.name .metadata.namespace | Quote }}}}
      conditions:
      {{{{ range list "PodScheduled" "Initialized" "ContainersReady" "Ready" }}}}
      - type: {{{{ . }}}}
        status: "True"
        lastTransitionTime: {{{{ Now | Quote }}}}
      {{{{ end }}}}
      containerStatuses:
      {{{{ range .spec.containers }}}}
      - name: {{{{ .name | Quote }}}}
        image: {{{{ .image | Quote }}}}
        imageID: {{{{ .image | Quote }}}}
        ready: true
        started: true
        restartCount: 0
        state:
          running:
            startedAt: {{{{ Now | Quote }}}}
      {{{{ end }}}}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-exit
spec:
  resourceRef: {{apiGroup: v1, kind: Pod}}
  selector:
    matchExpressions:{_POD_FILTER}
    - key: '.status.phase'
      operator: In
      values: [Running]
    - key: '.metadata.annotations["{EXIT_CODE_ANNOTATION}"]'
      operator: Exists
  delay:
    durationMilliseconds: 1000
    durationFrom:
      jq:
        expression: '.metadata.annotations["{RUN_FOR_ANNOTATION}"]'
  next:
    statusTemplate: |
      {{{{ $code := index .metadata.annotations "{EXIT_CODE_ANNOTATION}" }}}}
      {{{{ $reason := index .metadata.annotations "{EXIT_REASON_ANNOTATION}" }}}}
      {{{{ if not $reason }}}}
      {{{{ $reason = ternary "Completed" "Error" (eq $code "0") }}}}
      {{{{ end }}}}
      phase: {{{{ if eq $code "0" }}}}Succeeded{{{{ else }}}}Failed{{{{ end }}}}
      conditions:
      {{{{ range list "ContainersReady" "Ready" }}}}
      - type: {{{{ . }}}}
        status: "False"
        reason: PodCompleted
        lastTransitionTime: {{{{ Now | Quote }}}}
      {{{{ end }}}}
      containerStatuses:
      {{{{ range .spec.containers }}}}
      - name: {{{{ .name | Quote }}}}
        image: {{{{ .image | Quote }}}}
        imageID: {{{{ .image | Quote }}}}
        ready: false
        started: false
        restartCount: 0
        state:
          terminated:
            exitCode: {{{{ $code }}}}
            reason: {{{{ $reason | Quote }}}}
            finishedAt: {{{{ Now | Quote }}}}
      {{{{ end }}}}
"""


def gpu_node(name: str, ip: str, gpus: int = 8) -> dict[str, Any]:
    """A fake node that kwok manages, advertising CPU, memory and GPUs (nodes keep status on create)."""
    capacity = {
        "cpu": "64",
        "memory": "512Gi",
        "pods": "110",
        "ephemeral-storage": "1Ti",
        GPU_RESOURCE: str(gpus),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {NODE_ANNOTATION: "fake"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                "nvidia.com/gpu.present": "true",
            },
        },
        "spec": {},
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": "kwok",
                "kubeProxyVersion": "kwok",
                "containerRuntimeVersion": "kwok",
                "kernelVersion": "kwok",
                "osImage": "kwok",
                "bootID": name,
                "machineID": name,
                "systemUUID": name,
            },
        },
    }
