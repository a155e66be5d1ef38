{{- define "pglease.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "pglease.fullname" -}}
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

{{/* A name for a companion object: the full name, shortened so the suffix fits in 63 characters. */}}
{{- define "pglease.suffixed" -}}
{{- $root := index . 0 }}
{{- $suffix := index . 1 }}
{{- printf "%s-%s" (include "pglease.fullname" $root | trunc (int (sub 62 (len $suffix))) | trimSuffix "-") $suffix }}
{{- end }}

{{- define "pglease.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The workload's selector. It must never contain the role label: the sidecar rewrites that label
at every change of leader, and a selector that matched it would orphan the pods.
*/}}
{{- define "pglease.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pglease.name" . }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
{{- end }}

{{- define "pglease.labels" -}}
helm.sh/chart: {{ include "pglease.chart" . }}
{{ include "pglease.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
The `helm test` objects' labels. Not the workload's selector labels (app.kubernetes.io/name and
instance): every pod selector of the release (the workload's, the PodDisruptionBudget's, the
Services', the sidecar's peer selector) would otherwise match the test pod.
*/}}
{{- define "pglease.testLabels" -}}
helm.sh/chart: {{ include "pglease.chart" . }}
app.kubernetes.io/part-of: {{ include "pglease.fullname" . }}
app.kubernetes.io/component: test
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The selector as a label-selector string, for the sidecar's peer search. */}}
{{- define "pglease.selectorString" -}}
{{- $parts := list }}
{{- range $key, $value := include "pglease.selectorLabels" . | fromYaml }}
{{- $parts = append $parts (printf "%s=%s" $key $value) }}
{{- end }}
{{- join "," $parts }}
{{- end }}

{{- define "pglease.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "pglease.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "pglease.leaseName" -}}
{{- default (include "pglease.fullname" .) .Values.lease.name }}
{{- end }}

{{- define "pglease.databaseSecretName" -}}
{{- if .Values.database.existingSecret }}
{{- .Values.database.existingSecret }}
{{- else }}
{{- include "pglease.suffixed" (list . "database") }}
{{- end }}
{{- end }}

{{/*
A duration value in milliseconds, by the library's parser (Go's syntax, as the sidecar's); the
schema has refused a malformed one before any template runs.
*/}}
{{- define "pglease.durationMillis" -}}
{{- include "pglease-sidecar.durationMillis" (list "a duration" .) }}
{{- end }}

{{/* A duration for Prometheus (`for:`), from milliseconds, rounded up to whole seconds. */}}
{{- define "pglease.promDuration" -}}
{{- printf "%ds" (div (add (int64 .) 999) 1000) }}
{{- end }}

{{/*
This chart's values as the settings of the pglease-sidecar library (the same keys), with what
the chart derives filled in: names, the lease, the database Secret (the chart's own when
database.url is set), the image tag, the peer selector and the termination grace period.
*/}}
{{- define "pglease.sidecarConfig" -}}
{{- $v := deepCopy .Values }}
{{- $_ := set $v "name" (include "pglease.fullname" .) }}
{{- $_ := set $v "labels" (include "pglease.labels" . | fromYaml) }}
{{- $_ := set $v "terminationGracePeriodSeconds" $v.workload.terminationGracePeriodSeconds }}
{{- $_ := set $v.lease "name" (include "pglease.leaseName" .) }}
{{- $_ := set $v.database "existingSecret" (include "pglease.databaseSecretName" .) }}
{{- $_ := set $v.publish "peerSelector" (default (include "pglease.selectorString" .) $v.publish.peerSelector) }}
{{- $_ := set $v.sidecar.image "tag" (default .Chart.AppVersion $v.sidecar.image.tag) }}
{{- $_ := set $v.serviceAccount "name" (include "pglease.serviceAccountName" .) }}
{{- $_ := set $v.admissionPolicy "podLabels" (include "pglease.selectorLabels" . | fromYaml) }}
{{- toJson (pick $v "name" "labels" "terminationGracePeriodSeconds" "sidecar" "lease" "health" "cluster" "database" "history" "publish" "podInfo" "app" "serviceAccount" "rbac" "admissionPolicy") }}
{{- end }}
