{{/* The chart name, or nameOverride. */}}
{{- define "tj.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The prefix of every object name: the release name, plus the chart name unless the release holds it. */}}
{{- define "tj.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels of every object; pass a dict with "root" (the top context) and "component". */}}
{{- define "tj.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "tj.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: trainingjob
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "tj.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tj.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "tj.operator.fullname" -}}
{{- printf "%s-operator" (include "tj.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "tj.api.fullname" -}}
{{- printf "%s-api" (include "tj.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "tj.operator.serviceAccountName" -}}
{{- if .Values.operator.serviceAccount.create }}
{{- default (include "tj.operator.fullname" .) .Values.operator.serviceAccount.name }}
{{- else }}
{{- required "operator.serviceAccount.name is required when operator.serviceAccount.create is false" .Values.operator.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "tj.api.serviceAccountName" -}}
{{- if .Values.api.serviceAccount.create }}
{{- default (include "tj.api.fullname" .) .Values.api.serviceAccount.name }}
{{- else }}
{{- required "api.serviceAccount.name is required when api.serviceAccount.create is false" .Values.api.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* An image reference from {repository, tag, digest}; pass a dict with "image" and "root". */}}
{{- define "tj.image" -}}
{{- if .image.digest }}
{{- printf "%s@%s" .image.repository .image.digest }}
{{- else }}
{{- printf "%s:%s" .image.repository (default .root.Chart.AppVersion .image.tag) }}
{{- end }}
{{- end }}

{{/* The hardened pod and container security contexts shared by both Deployments. */}}
{{- define "tj.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "tj.containerSecurityContext" -}}
allowPrivilegeEscalation: false
privileged: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* EnvVars from a dict of defaults (name -> value) and a list of extra EnvVars that win over a default of the
same name, so nothing is listed twice. Pass a dict with "defaults" and "extra". */}}
{{- define "tj.env" -}}
{{- $extra := .extra | default list }}
{{- $overridden := list }}
{{- range $extra }}{{ $overridden = append $overridden .name }}{{ end }}
{{- range $name, $value := .defaults }}
{{- if not (has $name $overridden) }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- end }}
{{- with $extra }}
{{ toYaml . }}
{{- end }}
{{- end }}
{{- define "tj.celStrings" -}}
[{{ range $i, $s := . }}{{ if $i }}, {{ end }}{{ $s | squote }}{{ end }}]
{{- end }}
{{- define "tj.api.tlsSecretName" -}}
{{- .Values.api.tls.secretName | default (printf "%s-tls" (include "tj.api.fullname" .)) }}
{{- end }}
