{{- /*
The operator's rules, derived from operator/trainingjob/cluster.py, informer.py and handlers.py (kopf,
standalone, for the lifecycle only). No wildcards, and Secrets only created, never read; tests/integration/test_chart.py runs the
operator under exactly these rules.
*/}}
{{- define "tj.operator.namespacedRules" -}}
# The informer lists and watches the pods with a job label (the operator's memory of them); cluster.py creates
# the ranks, deletes them on restart/suspend/cleanup, lists one job's pods when the watch has not caught up with
# a pod its status tracks, and patches a pod to remove the tracking finalizer it was created with once the job's
# status no longer needs it (and an earlier operator's pod to take it out of the tracking scheduling gate).
- apiGroups: [""]
  resources: [pods]
  verbs: [create, delete, list, watch, patch]
# cluster.py keeps the last log lines of a failed rank as evidence in status.lastFailure.
- apiGroups: [""]
  resources: [pods/log]
  verbs: [get]
# The headless Service that gives every rank a stable DNS name: created once per job; the informer lists and
# watches the Services with a job label.
- apiGroups: [""]
  resources: [services]
  verbs: [create, list, watch]
# Each job's key (its parameter servers sign their messages with it), created with the job's pods. Create only:
# the operator never reads a Secret, its own or anyone's; a 409 means the job's key exists already.
- apiGroups: [""]
  resources: [secrets]
  verbs: [create]
# Each job's NetworkPolicy: only the job's own pods (and the operator, on the progress port) reach its pods.
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [create]
# The operator's own Events (JobCreated, WorkerFailed, JobSucceeded, ...); kopf's posting is off.
- apiGroups: [""]
  resources: [events]
  verbs: [create]
# The informer lists and watches TrainingJobs (reconcile reads them from its memory); the TTL policy deletes
# finished ones.
- apiGroups: [trainingjob.io]
  resources: [trainingjobs]
  verbs: [list, watch, delete]
# Status is written through the status subresource, guarded by the resourceVersion (a merge patch).
- apiGroups: [trainingjob.io]
  resources: [trainingjobs/status]
  verbs: [patch]
# Pods and Services carry a controller owner reference with blockOwnerDeletion: true; where the
# OwnerReferencesPermissionEnforcement admission plugin is on, that needs update on the owner's finalizers.
- apiGroups: [trainingjob.io]
  resources: [trainingjobs/finalizers]
  verbs: [update]
# Sweeps: the informers list and watch them (and the TrainingJobs with a sweep label, under the rule above);
# their status is a merge patch guarded by the resourceVersion; a sweep creates its trials' TrainingJobs, suspends
# a pruned one (a merge patch of spec.runPolicy.suspend) or deletes it (the rule above); the trials' jobs carry a
# controller owner reference to the sweep with blockOwnerDeletion.
- apiGroups: [trainingjob.io]
  resources: [trainingsweeps]
  verbs: [list, watch]
- apiGroups: [trainingjob.io]
  resources: [trainingsweeps/status]
  verbs: [patch]
- apiGroups: [trainingjob.io]
  resources: [trainingsweeps/finalizers]
  verbs: [update]
- apiGroups: [trainingjob.io]
  resources: [trainingjobs]
  verbs: [create, patch]
# Kueue (jobs with scheduling.queueName, kube/kueue.py): the operator reads a queued job's Workload each
# reconcile and creates it once; it patches its spec when the job changes (active false while the job is
# suspended, queueName moved while no quota is reserved), deletes it when the job names no queue any more (by
# UID), and patches its status a few times per admission (PodsReady, the quota reservation released after an
# eviction, Finished when the job ends: merge patches guarded by the resourceVersion). Where Kueue is not
# installed these rules name a resource that does not exist, and grant nothing.
- apiGroups: [kueue.x-k8s.io]
  resources: [workloads]
  verbs: [get, create, patch, delete]
- apiGroups: [kueue.x-k8s.io]
  resources: [workloads/status]
  verbs: [patch]
{{- end }}
{{- define "tj.operator.kueueClusterRules" -}}
# Kueue, cluster-scoped: the ResourceFlavors an admission names (their node labels and tolerations go on the
# pods), and the pods' PriorityClass (its value is the Workload's priority).
- apiGroups: [kueue.x-k8s.io]
  resources: [resourceflavors]
  verbs: [get]
- apiGroups: [scheduling.k8s.io]
  resources: [priorityclasses]
  verbs: [get]
{{- end }}
{{- define "tj.operator.roomRules" -}}
# Elastic jobs (workers.minReplicas): while one runs shrunk, kube/room.py counts the room for its missing workers
# once per resize interval: the nodes' allocatable resources less what the unfinished pods bound to them request
# (pods of every namespace hold them). List only, and only when the operator watches every namespace: one that
# watches a single namespace has no cluster-wide reads, and its shrunk jobs do not grow back.
- apiGroups: [""]
  resources: [nodes, pods]
  verbs: [list]
{{- end }}
{{- define "tj.operator.reviewRules" -}}
# /metrics names every tenant's jobs: the operator serves it only to a bearer token Kubernetes accepts
# (TokenReview) of a caller allowed `get` on the path /metrics (SubjectAccessReview), e.g. bound to the
# <release>-metrics-reader ClusterRole.
- apiGroups: [authentication.k8s.io]
  resources: [tokenreviews]
  verbs: [create]
- apiGroups: [authorization.k8s.io]
  resources: [subjectaccessreviews]
  verbs: [create]
{{- end }}
{{- define "tj.metricsReaderRules" -}}
# Read the operator's and the API's /metrics (a nonResourceURL: no namespace, no object).
- nonResourceURLs: [/metrics]
  verbs: [get]
{{- end }}
{{- define "tj.operator.crdRules" -}}
# kopf's resource observer: notices the TrainingJob CRD when it is created or changed after startup.
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [list, watch]
{{- end }}
{{- define "tj.operator.namespaceRules" -}}
# Namespaced mode only: kopf's namespace observer lists and watches namespaces (names and labels, no contents).
# Without it kopf retries for about a minute at startup, reconciling nothing, before it falls back.
- apiGroups: [""]
  resources: [namespaces]
  verbs: [list, watch]
{{- end }}
{{- define "tj.operator.leaseRules" -}}
# Leader election: the operator reads, creates and renews its Lease (in the release namespace only), so that
# of several operator pods only the holder acts.
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, create, update]
{{- end }}
{{- define "tj.api.jobRules" -}}
# The jobs and sweeps, read: list/watch feed the API's cache. The API writes them only as its caller
# (impersonation, below), so it holds no write right of its own.
- apiGroups: [trainingjob.io]
  resources: [trainingjobs, trainingsweeps]
  verbs: [get, list, watch]
# A job's pods and events (a replica's pod is found before its log is read, as the caller).
- apiGroups: [""]
  resources: [pods, events]
  verbs: [get, list, watch]
{{- end }}
{{- define "tj.api.impersonationRules" -}}
# Acting as its caller: every write, and every log read, is made as the user TokenReview named, with their
# groups, uid and ServiceAccount extras, so RBAC, admission policies and the audit log see the caller. Never
# for members of system:masters or system:nodes (refused in the API's code).
- apiGroups: [""]
  resources: [users, groups, serviceaccounts]
  verbs: [impersonate]
- apiGroups: [authentication.k8s.io]
  resources:
    - uids
    {{- range list "credential-id" "node-name" "node-uid" "pod-name" "pod-uid" }}
    - userextras/authentication.kubernetes.io/{{ . }}
    {{- end }}
  verbs: [impersonate]
{{- end }}
