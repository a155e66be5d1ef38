{{/*
Checks across values that values.schema.json cannot express. Each message names the values
to change and how.
*/}}
{{- define "pglease.validate" -}}
{{- $v := .Values }}

{{- if and $v.database.existingSecret $v.database.url }}
{{- fail "database: set either database.existingSecret or database.url, not both" }}
{{- end }}
{{- if not (or $v.database.existingSecret $v.database.url) }}
{{- fail "database: set database.existingSecret (a Secret whose key database.secretKey holds the connection URL) or, for a trial, database.url" }}
{{- end }}

{{- $graceMs := include "pglease.durationMillis" $v.lease.gracePeriod | int64 }}
{{- if ge $graceMs (mul (int64 $v.workload.terminationGracePeriodSeconds) 1000) }}
{{- fail (printf "lease.gracePeriod (%s) must be shorter than workload.terminationGracePeriodSeconds (%d s): past it the kubelet kills the sidecar before it releases the lease" $v.lease.gracePeriod (int64 $v.workload.terminationGracePeriodSeconds)) }}
{{- end }}

{{- $durationMs := include "pglease.durationMillis" $v.lease.duration | int64 }}
{{- if $v.lease.renewInterval }}
{{- if ge (include "pglease.durationMillis" $v.lease.renewInterval | int64) $durationMs }}
{{- fail (printf "lease.renewInterval (%s) must be shorter than lease.duration (%s); leave it empty for a third of the duration" $v.lease.renewInterval $v.lease.duration) }}
{{- end }}
{{- end }}

{{- if eq $v.app.name $v.sidecar.name }}
{{- fail (printf "app.name %q is the sidecar's container name (sidecar.name): the pod cannot hold two containers of one name; name the application's container after your application (e.g. app.name: orders)" $v.app.name) }}
{{- end }}

{{- if and $v.networkPolicy.enabled $v.metrics.serviceMonitor.enabled (not $v.networkPolicy.metricsFrom) }}
{{- fail "networkPolicy.metricsFrom: with networkPolicy.enabled and metrics.serviceMonitor.enabled, name the Prometheus that scrapes the sidecars (e.g. [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]), or the policy refuses its scrapes" }}
{{- end }}

{{- $selector := include "pglease.selectorLabels" . | fromYaml }}
{{- if hasKey $selector $v.publish.roleLabel }}
{{- fail (printf "publish.roleLabel %q is one of the workload's selector labels: the sidecar rewrites it at every change of leader, so choose another key" $v.publish.roleLabel) }}
{{- end }}
{{- if hasKey $v.workload.podLabels $v.publish.roleLabel }}
{{- fail (printf "workload.podLabels must not set the role label %q: the sidecar owns it" $v.publish.roleLabel) }}
{{- end }}

{{- if and $v.sidecar.native (semverCompare "<1.29.0-0" .Capabilities.KubeVersion.Version) }}
{{- fail (printf "sidecar.native needs Kubernetes 1.29 or newer (this cluster: %s); set sidecar.native=false" .Capabilities.KubeVersion.Version) }}
{{- end }}

{{- if $v.readinessGate.enabled }}
{{- include "pglease.validateGatedRollout" . }}
{{- end }}
{{- end }}

{{/*
With the readiness gate only the leader is Ready. A rollout that waits for a new pod to be
Ready before it removes the old leader never ends: refuse such settings.
*/}}
{{- define "pglease.validateGatedRollout" -}}
{{- $v := .Values }}
{{- $replicas := int64 $v.workload.replicas }}
{{- if eq $v.workload.kind "Deployment" }}
{{- $strategy := $v.workload.strategy }}
{{- if and $strategy (ne (default "RollingUpdate" $strategy.type) "Recreate") }}
{{- if not (include "pglease.coversReplicas" (list (dig "rollingUpdate" "maxUnavailable" 0 $strategy) $replicas)) }}
{{- fail (printf "readinessGate.enabled with a rolling update deadlocks unless workload.strategy.rollingUpdate.maxUnavailable is at least the replica count (%d, or \"100%%\"): the new pods cannot become Ready while the old leader holds the lease, and the old leader is not removed before they are. Use workload.strategy.type=Recreate (or leave workload.strategy empty), or set maxUnavailable: \"100%%\" and maxSurge: 0" $replicas) }}
{{- end }}
{{- end }}
{{- else }}
{{- if ne $v.workload.podManagementPolicy "Parallel" }}
{{- fail "readinessGate.enabled with a StatefulSet needs workload.podManagementPolicy=Parallel: with OrderedReady the StatefulSet stops creating pods at the first follower, which is never Ready" }}
{{- end }}
{{- $update := $v.workload.updateStrategy }}
{{- if and $update (ne (default "RollingUpdate" $update.type) "OnDelete") }}
{{- if not (include "pglease.coversReplicas" (list (dig "rollingUpdate" "maxUnavailable" 0 $update) $replicas)) }}
{{- fail (printf "readinessGate.enabled with a StatefulSet rolling update deadlocks: each updated pod must be Ready before the next is replaced, and a follower never is. Use workload.updateStrategy.type=OnDelete (or leave workload.updateStrategy empty), or rollingUpdate.maxUnavailable of at least %d where the cluster enables MaxUnavailableStatefulSet" $replicas) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* "true" when a maxUnavailable value (count or percentage) lets every one of the replicas go at once. */}}
{{- define "pglease.coversReplicas" -}}
{{- $value := index . 0 }}
{{- $replicas := index . 1 }}
{{- if kindIs "string" $value }}
{{- if and (hasSuffix "%" $value) (ge (trimSuffix "%" $value | int64) 100) }}true{{ end }}
{{- else if ge (int64 $value) $replicas }}true
{{- end }}
{{- end }}
