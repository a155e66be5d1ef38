{{/*
Checks of the settings that would otherwise render a pod that cannot work. Each message names
the setting and the fix.
*/}}
{{- define "pglease-sidecar.validate" -}}
{{- $c := include "pglease-sidecar.config" . | fromJson }}
{{- include "pglease-sidecar.validateName" $c }}
{{- if not $c.database.existingSecret }}
{{- fail "pglease-sidecar: set database.existingSecret, a Secret whose key database.secretKey holds the connection URL (postgres://USER:PASSWORD@HOST:5432/DB?sslmode=verify-full)" }}
{{- end }}

{{- $durationMs := include "pglease-sidecar.durationMillis" (list "lease.duration" $c.lease.duration) | int64 }}
{{- $_ := include "pglease-sidecar.durationMillis" (list "lease.retryInterval" $c.lease.retryInterval) }}
{{- if $c.lease.renewInterval }}
{{- if ge (include "pglease-sidecar.durationMillis" (list "lease.renewInterval" $c.lease.renewInterval) | int64) $durationMs }}
{{- fail (printf "pglease-sidecar: lease.renewInterval (%s) must be shorter than lease.duration (%s); leave it empty for a third of the duration" $c.lease.renewInterval $c.lease.duration) }}
{{- end }}
{{- end }}
{{- $graceMs := include "pglease-sidecar.durationMillis" (list "lease.gracePeriod" $c.lease.gracePeriod) | int64 }}
{{- if ge $graceMs (mul (int64 $c.terminationGracePeriodSeconds) 1000) }}
{{- fail (printf "pglease-sidecar: lease.gracePeriod (%s) must be shorter than terminationGracePeriodSeconds (%d s): past it the kubelet kills the sidecar before it releases the lease" $c.lease.gracePeriod (int64 $c.terminationGracePeriodSeconds)) }}
{{- end }}

{{- $_ = include "pglease-sidecar.durationMillis" (list "history.maxAge" $c.history.maxAge) }}
{{- if not (and (regexMatch "^[0-9]+$" (toString $c.history.maxRowsPerKey)) (ge (int64 $c.history.maxRowsPerKey) 1) (le (int64 $c.history.maxRowsPerKey) 10000000)) }}
{{- fail (printf "pglease-sidecar: history.maxRowsPerKey %v must be a whole number from 1 to 10000000" $c.history.maxRowsPerKey) }}
{{- end }}

{{- with $c.sidecar.startupProbe }}
{{- $probe := include "pglease-sidecar.startupProbe" $c | fromJson }}
{{- $budgetMs := mul (int64 (default 10 $probe.periodSeconds)) (int64 $probe.failureThreshold) 1000 }}
{{- $startMs := include "pglease-sidecar.durationMillis" (list "sidecar.startTimeout" $c.sidecar.startTimeout) | int64 }}
{{- if le $budgetMs $startMs }}
{{- fail (printf "pglease-sidecar: sidecar.startupProbe allows %d ms (periodSeconds x failureThreshold), not more than sidecar.startTimeout (%s): the kubelet would restart the sidecar while it still waits for PostgreSQL. Leave failureThreshold unset to derive it, or raise it" $budgetMs $c.sidecar.startTimeout) }}
{{- end }}
{{- end }}

{{- if and $c.sidecar.native (semverCompare "<1.29.0-0" .context.Capabilities.KubeVersion.Version) }}
{{- fail (printf "pglease-sidecar: sidecar.native needs Kubernetes 1.29 or newer (this cluster: %s); set sidecar.native=false and list the container under containers" .context.Capabilities.KubeVersion.Version) }}
{{- end }}
{{- end }}

{{- define "pglease-sidecar.validateName" -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" (toString .name)) }}
{{- fail (printf "pglease-sidecar: name %q must be a DNS label (lowercase letters, digits and '-'): it names the ServiceAccount, Role and RoleBinding; set it, e.g. to your release's full name" (toString .name)) }}
{{- end }}
{{- if gt (len .name) 63 }}
{{- fail (printf "pglease-sidecar: name %q is longer than 63 characters" .name) }}
{{- end }}
{{- end }}
